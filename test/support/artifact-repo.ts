// The scaffolding of the artifact tests: alice's private repository `app`
// with workflows pushed to it and one runner labelled `artifacts`; a run is
// dispatched and its job taken on demand, giving the runtime token a step of
// that job would hold (what @actions/artifact authenticates with).
import assert from 'node:assert/strict';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { decodeTask, registerRunner } from './runner-client.ts';
import type { DecodedTask, RunnerClient } from './runner-client.ts';
import { startTestServer } from './server.ts';
import type { TestDialect, TestServer, TestUser } from './server.ts';
import { createWorkDir, remoteUrl } from './workdir.ts';
import type { WorkDir } from './workdir.ts';

/** A dispatched run whose job the runner took: the run's id, the task and its runtime token. */
export interface TakenRun {
  id: number;
  task: DecodedTask;
  token: string;
}

export interface ArtifactRepo {
  s: TestServer;
  alice: TestUser;
  work: WorkDir;
  runner: RunnerClient;
  /** Dispatches a workflow (build.yml by default) on main and takes its first job. */
  dispatchRun(workflow?: string): Promise<TakenRun>;
  /** Takes the next waiting job, which must exist (another leg of a matrix). */
  takeJob(): Promise<DecodedTask>;
  stop(): Promise<void>;
}

export async function startArtifactRepo(
  dialect: TestDialect,
  settings: Record<string, string>,
  workflows: Record<string, string>,
): Promise<ArtifactRepo> {
  const s = await startTestServer(dialect, settings);
  const alice = await s.createUser('alice');
  assert.equal(
    (await createCurrentUserRepo({ client: alice.client, body: { name: 'app', private: true } })).status,
    201,
  );
  const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
  await work.commit(
    Object.fromEntries(Object.entries(workflows).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
    'Add workflows',
  );
  assert.equal((await work.push('main')).code, 0);
  const token = await repoGetRunnerRegistrationToken({ client: alice.client, path: { owner: 'alice', repo: 'app' } });
  const runner = await registerRunner(s.url, (token.data as { token: string }).token, { labels: ['artifacts'] });
  const takeJob = async (): Promise<DecodedTask> => {
    const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
    assert.ok(fetched.task, 'the job is handed out');
    return decodeTask(fetched.task as Task);
  };
  return {
    s,
    alice,
    work,
    runner,
    takeJob,
    async dispatchRun(workflow = 'build.yml') {
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: workflow },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(dispatched.status, 201, JSON.stringify(dispatched.error));
      const task = await takeJob();
      return { id: (dispatched.data as { id: number }).id, task, token: String(task.context.gitea_runtime_token) };
    },
    async stop() {
      await work.remove();
      await s.stop();
    },
  };
}
