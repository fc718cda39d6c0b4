// The start the memory tests share: a `gantry web` child (whose RSS they
// measure, so nothing else runs in its process) with an administrator, a
// repository holding a one-job workflow, a runner registered for the job's
// label, the workflow dispatched and its task fetched.
import assert from 'node:assert/strict';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import type { FetchTaskResponse } from '../../src/gen/runner/v1/messages_pb.ts';
import type { GantryChild } from './gantry-child.ts';
import { registerRunner } from './runner-client.ts';
import type { RunnerClient } from './runner-client.ts';
import { createWorkDir, remoteUrl } from './workdir.ts';

export interface ChildTask {
  /** The administrator's access token (scope all). */
  token: string;
  /** An /api/v1 call as the administrator; fails the test on a status of 300 or more. */
  api(method: string, apiPath: string, body?: unknown): Promise<unknown>;
  runner: RunnerClient;
  /** The answer that handed the runner its task (`fetched.task` is set). */
  fetched: FetchTaskResponse;
}

export interface ChildTaskOptions {
  repo: string;
  /** File name under .forgejo/workflows/. */
  workflowFile: string;
  /** The workflow: one job on `label`, run on workflow_dispatch. */
  workflow: string;
  label: string;
}

/** Seeds the child's database (through `settings`, before it starts), starts it and fetches the task. */
export async function startChildWithTask(
  server: GantryChild,
  settings: Record<string, string>,
  options: ChildTaskOptions,
): Promise<ChildTask> {
  const setup = await createDeps(loadConfig(settings), { logger: pino({ level: 'silent' }) });
  let token: string;
  try {
    const root = await setup.services.accounts.createUser({
      username: 'root',
      email: 'root@example.com',
      password: 'child-task-password-1',
      isAdmin: true,
      mustChangePassword: false,
    });
    token = (await setup.services.accessTokens.create(root, 'child-task', ['all'])).secret;
  } finally {
    await setup.close();
  }
  await server.start();
  const url = server.url;
  const api = async (method: string, apiPath: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${url}/api/v1${apiPath}`, {
      method,
      headers: {
        authorization: `token ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    assert.ok(res.status < 300, `${method} ${apiPath}: ${res.status} ${text}`);
    return text === '' ? null : JSON.parse(text);
  };
  await api('POST', '/user/repos', { name: options.repo });
  const work = await createWorkDir(remoteUrl(url, 'root', options.repo, { user: 'root', password: token }));
  try {
    await work.commit({ [`.forgejo/workflows/${options.workflowFile}`]: options.workflow }, 'workflow');
    assert.equal((await work.push('main')).code, 0);
  } finally {
    await work.remove();
  }
  const registration = (await api('GET', `/repos/root/${options.repo}/actions/runners/registration-token`)) as {
    token: string;
  };
  const runner = await registerRunner(url, registration.token, { labels: [options.label] });
  await api('POST', `/repos/root/${options.repo}/actions/workflows/${options.workflowFile}/dispatches`, {
    ref: 'main',
    inputs: {},
  });
  const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
  assert.ok(fetched.task, 'a task');
  return { token, api, runner, fetched };
}
