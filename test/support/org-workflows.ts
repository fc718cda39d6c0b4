// An organization repository with workflows pushed to it, a webhook receiver
// subscribed to some events of the organization, and runners registered on
// demand, one per label: the scaffolding of the tests that dispatch runs and
// play the runner through them (workflow and job concurrency groups).
import assert from 'node:assert/strict';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { createRunnerClient, decodeTask } from './runner-client.ts';
import type { DecodedTask, RunnerClient } from './runner-client.ts';
import { startTestServer } from './server.ts';
import type { TestDialect, TestServer, TestUser } from './server.ts';
import { startWebhookReceiver } from './webhook-receiver.ts';
import type { WebhookReceiver } from './webhook-receiver.ts';
import { createWorkDir, remoteUrl } from './workdir.ts';
import type { WorkDir } from './workdir.ts';

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

export interface OrgWorkflows {
  s: TestServer;
  /** Owner of the organization `acme`, whose repository `app` holds the workflows. */
  owner: TestUser;
  receiver: WebhookReceiver;
  work: WorkDir;
  /** Dispatches a workflow of acme/app on main; the new run's id. */
  dispatch(file: string, inputs?: Record<string, string>): Promise<number>;
  /** The runner of this label, registered to the organization on first use. */
  runner(label: string): Promise<RunnerClient>;
  /** A FetchTask that must hand out a task. */
  fetchOne(client: RunnerClient): Promise<DecodedTask>;
  /** A FetchTask (1.2 s deadline) that must hand out nothing. */
  fetchNone(client: RunnerClient): Promise<void>;
  /** An UpdateTask without a result; the result the server answers. */
  heartbeat(client: RunnerClient, taskId: number): Promise<Result | undefined>;
  /** An UpdateTask that finishes the task; the result the server answers. */
  finish(
    client: RunnerClient,
    taskId: number,
    result: Result,
    outputs?: Record<string, string>,
  ): Promise<Result | undefined>;
  stop(): Promise<void>;
}

export async function startOrgWorkflows(
  dialect: TestDialect,
  options: { workflows: Record<string, string>; hookEvents: string[] },
): Promise<OrgWorkflows> {
  const s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
  const owner = await s.createUser('owner');
  const receiver = await startWebhookReceiver();
  assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
  const repo = await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } });
  assert.equal(repo.status, 201, repo.text);
  const hook = await s.api('POST', '/orgs/acme/hooks', {
    token: owner.token,
    body: {
      type: 'forgejo',
      config: { url: `${receiver.url}/hook`, content_type: 'json' },
      events: options.hookEvents,
      active: true,
    },
  });
  assert.equal(hook.status, 201, hook.text);
  const work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.password }));
  await work.commit(
    Object.fromEntries(Object.entries(options.workflows).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
    'Workflows',
  );
  assert.equal((await work.push('main')).code, 0);
  const token = await s.api('GET', '/orgs/acme/actions/runners/registration-token', { token: owner.token });
  assert.equal(token.status, 200, token.text);
  const registrationToken = (token.json as { token: string }).token;
  const runners = new Map<string, RunnerClient>();

  const updateTask = async (
    client: RunnerClient,
    taskId: number,
    result: Result,
    outputs: Record<string, string>,
  ): Promise<Result | undefined> => {
    const stoppedAt = result === Result.UNSPECIFIED ? {} : { stoppedAt: now() };
    const answer = await client.runner.updateTask({
      state: { id: BigInt(taskId), result, startedAt: now(), ...stoppedAt, steps: [] },
      outputs,
    });
    return answer.state?.result;
  };

  return {
    s,
    owner,
    receiver,
    work,
    async dispatch(file, inputs = {}) {
      const res = await s.api('POST', `/repos/acme/app/actions/workflows/${file}/dispatches`, {
        token: owner.token,
        body: { ref: 'main', inputs, return_run_info: true },
      });
      assert.equal(res.status, 201, res.text);
      return (res.json as { id: number }).id;
    },
    async runner(label) {
      const existing = runners.get(label);
      if (existing) return existing;
      const client = createRunnerClient(s.url);
      const res = await client.runner.register({
        name: `runner-${label}`,
        token: registrationToken,
        version: 'v12.0.0',
        labels: [label],
      });
      assert.ok(res.runner);
      client.credentials = { id: Number(res.runner.id), uuid: res.runner.uuid, token: res.runner.token };
      runners.set(label, client);
      return client;
    },
    async fetchOne(client) {
      const res = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(res.task, 'a task');
      return decodeTask(res.task as Task);
    },
    async fetchNone(client) {
      const res = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 });
      assert.equal(res.task, undefined, 'no task is handed out');
    },
    heartbeat: (client, taskId) => updateTask(client, taskId, Result.UNSPECIFIED, {}),
    finish: (client, taskId, result, outputs = {}) => updateTask(client, taskId, result, outputs),
    async stop() {
      await work.remove();
      await s.stop();
      await receiver.close();
    },
  };
}
