// Commit statuses as a Forgejo client and a runner see them: the status API
// (POST/GET …/statuses/{sha}, …/commits/{ref}/statuses, …/commits/{ref}/status)
// with Forgejo's keys, numbering, sorting, paging and ref resolution; who may
// read and write; the statuses a push run writes on the pushed commit as its
// jobs move; and the `status` webhook. forgejo-ts has every status call.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  repoCreateStatus,
  repoGetCombinedStatusByRef,
  repoListStatuses,
  repoListStatusesByRef,
} from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { answer } from '../support/actions.ts';
import { createRunnerClient, decodeTask } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { ReceivedDelivery, WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

interface StatusJson {
  id: number;
  status: string;
  context: string;
  description: string;
  target_url: string;
  url: string;
  creator: { login: string } | null;
}

interface CombinedJson {
  state: string;
  sha: string;
  total_count: number;
  statuses: StatusJson[] | null;
  repository: { full_name: string } | null;
}

const CI = [
  'name: CI',
  'on: push',
  'jobs:',
  '  build:',
  '    runs-on: cs-build',
  '    steps:',
  '      - run: echo build',
  '  test:',
  '    runs-on: cs-test',
  '    steps:',
  '      - run: echo test',
  '',
].join('\n');
const MANUAL =
  'name: Manual\non: workflow_dispatch\njobs:\n  once:\n    runs-on: cs-manual\n    steps:\n      - run: echo once\n';

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

for (const dialect of testDialects()) {
  describe(`commit statuses [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let stranger: TestUser;
    let receiver: WebhookReceiver;
    let apiWork: WorkDir;
    let ciWork: WorkDir;
    /** The commit of repo `pub` the API tests write on. */
    let sha: string;
    /** The commit the push run of repo `ci` reports on. */
    let pushed: string;
    let runner: RunnerClient;

    const create = async (user: TestUser, ref: string, body: Record<string, string>) =>
      repoCreateStatus({ client: user.client, path: { owner: 'owner', repo: 'pub', sha: ref }, body });

    const ciStatuses = async (): Promise<StatusJson[]> => {
      const res = await repoListStatuses({
        client: owner.client,
        path: { owner: 'owner', repo: 'ci', sha: pushed },
        query: { sort: 'highestindex', limit: 50 },
      });
      assert.equal(res.status, 200);
      return res.data as unknown as StatusJson[];
    };

    const latest = (list: StatusJson[], context: string): StatusJson | undefined =>
      list.filter((st) => st.context === context).at(-1);

    const combinedCi = async (): Promise<CombinedJson> => {
      const res = await repoGetCombinedStatusByRef({
        client: owner.client,
        path: { owner: 'owner', repo: 'ci', ref: 'main' },
      });
      assert.equal(res.status, 200);
      return res.data as unknown as CombinedJson;
    };

    const fetchOne = async (): Promise<DecodedTask> => {
      const res = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(res.task, 'a task');
      return decodeTask(res.task as Task);
    };

    const update = async (taskId: number, result: Result, done: boolean) =>
      runner.runner.updateTask({
        state: { id: BigInt(taskId), result, startedAt: now(), ...(done ? { stoppedAt: now() } : {}), steps: [] },
      });

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      stranger = await s.createUser('stranger');
      receiver = await startWebhookReceiver();
      for (const [name, isPrivate] of [
        ['pub', false],
        ['ci', false],
        ['secret', true],
      ] as const) {
        const res = await s.api('POST', '/user/repos', { token: owner.token, body: { name, private: isPrivate } });
        assert.equal(res.status, 201, res.text);
      }
      for (const repo of ['pub', 'ci']) {
        const hook = await s.api('POST', `/repos/owner/${repo}/hooks`, {
          token: owner.token,
          body: {
            type: 'forgejo',
            config: { url: `${receiver.url}/${repo}`, content_type: 'json' },
            events: ['status'],
            active: true,
          },
        });
        assert.equal(hook.status, 201, hook.text);
      }
      const credentials = { user: 'owner', password: owner.password };
      apiWork = await createWorkDir(remoteUrl(s.url, 'owner', 'pub', credentials));
      sha = await apiWork.commit({ 'README.md': 'hello\n' }, 'First');
      await apiWork.git(['tag', 'v1']);
      assert.equal((await apiWork.push('main', 'v1')).code, 0);
      const token = await s.api('GET', '/repos/owner/ci/actions/runners/registration-token', { token: owner.token });
      assert.equal(token.status, 200, token.text);
      runner = createRunnerClient(s.url);
      const reg = await runner.runner.register({
        name: 'cs-runner',
        token: (token.json as { token: string }).token,
        version: 'v12.0.0',
        labels: ['cs-build', 'cs-test', 'cs-manual'],
      });
      assert.ok(reg.runner);
      runner.credentials = { id: Number(reg.runner.id), uuid: reg.runner.uuid, token: reg.runner.token };
      ciWork = await createWorkDir(remoteUrl(s.url, 'owner', 'ci', credentials));
      pushed = await ciWork.commit(
        { '.forgejo/workflows/ci.yml': CI, '.forgejo/workflows/manual.yml': MANUAL },
        'Workflows',
      );
      assert.equal((await ciWork.push('main')).code, 0);
    });

    after(async () => {
      await apiWork?.remove();
      await ciWork?.remove();
      await s?.stop();
      await receiver?.close();
    });

    test('POST answers 201 with Forgejo keys: id is the per-commit index, the state is `status`, a short sha is expanded, values trimmed', async () => {
      const first = await create(owner, sha.slice(0, 7), {
        state: 'pending',
        context: ' ci/lint ',
        description: ' linting ',
        target_url: 'https://ci.example/1',
      });
      assert.equal(first.status, 201);
      const body = first.data as unknown as StatusJson;
      assert.equal(body.id, 1);
      assert.equal(body.status, 'pending');
      assert.equal(body.context, 'ci/lint');
      assert.equal(body.description, 'linting');
      assert.equal(body.target_url, 'https://ci.example/1');
      assert.equal(body.url, `${s.rootUrl}api/v1/repos/owner/pub/statuses/${sha}`);
      assert.equal(body.creator?.login, 'owner');
      const second = await create(owner, sha, { state: 'success', context: 'ci/lint', description: 'lint ok' });
      assert.equal((second.data as unknown as StatusJson).id, 2);
      const third = await create(owner, sha, { state: 'failure', context: 'ci/test', description: 'tests failed' });
      assert.equal((third.data as unknown as StatusJson).id, 3);
    });

    test('lists sort (newest first, oldest, leastindex = index desc, highestindex = index asc), filter by state, page with X-Total-Count and Link', async () => {
      const ids = async (query: Record<string, unknown>) => {
        const res = await answer(
          repoListStatuses({ client: owner.client, path: { owner: 'owner', repo: 'pub', sha }, query }),
        );
        assert.equal(res.status, 200);
        return { ids: (res.data as StatusJson[]).map((st) => st.id), headers: res.headers };
      };
      assert.deepEqual((await ids({})).ids, [3, 2, 1]);
      assert.deepEqual((await ids({ sort: 'oldest' })).ids, [1, 2, 3]);
      assert.deepEqual((await ids({ sort: 'leastindex' })).ids, [3, 2, 1]);
      assert.deepEqual((await ids({ sort: 'highestindex' })).ids, [1, 2, 3]);
      assert.deepEqual((await ids({ state: 'success' })).ids, [2]);
      const paged = await ids({ sort: 'highestindex', limit: 2, page: 2 });
      assert.deepEqual(paged.ids, [3]);
      assert.equal(paged.headers['x-total-count'], '3');
      assert.match(paged.headers.link ?? '', /rel="first"/);
    });

    test('a ref resolves as a branch, a tag or a short sha; an unknown ref answers 200 [] and the empty combined status', async () => {
      for (const ref of ['main', 'v1', sha.slice(0, 8)]) {
        const res = await repoListStatusesByRef({ client: owner.client, path: { owner: 'owner', repo: 'pub', ref } });
        assert.equal(res.status, 200);
        assert.equal((res.data as unknown as StatusJson[]).length, 3, ref);
      }
      const combined = await repoGetCombinedStatusByRef({
        client: s.anonymous,
        path: { owner: 'owner', repo: 'pub', ref: 'v1' },
      });
      assert.equal(combined.status, 200);
      const c = combined.data as unknown as CombinedJson;
      // Latest per context: ci/lint success and ci/test failure → failure.
      assert.equal(c.state, 'failure');
      assert.equal(c.sha, sha);
      assert.equal(c.total_count, 2);
      assert.deepEqual(
        c.statuses?.map((st) => [st.context, st.status]),
        [
          ['ci/test', 'failure'],
          ['ci/lint', 'success'],
        ],
      );
      assert.equal(c.repository?.full_name, 'owner/pub');

      const unknown = await repoListStatusesByRef({
        client: owner.client,
        path: { owner: 'owner', repo: 'pub', ref: 'no-such-branch' },
      });
      assert.equal(unknown.status, 200);
      assert.deepEqual(unknown.data, []);
      const empty = await s.api('GET', '/repos/owner/pub/commits/no-such-branch/status', { token: owner.token });
      assert.equal(empty.status, 200);
      assert.deepEqual(empty.json, {
        state: '',
        sha: '',
        total_count: 0,
        statuses: null,
        repository: null,
        commit_url: '',
        url: '',
      });
    });

    test('guards: anonymous reads a public repository; a private one is 404 to strangers; POST needs a token and write access; an unknown commit is 404', async () => {
      assert.equal(
        (await repoListStatuses({ client: s.anonymous, path: { owner: 'owner', repo: 'pub', sha } })).status,
        200,
      );
      for (const client of [s.anonymous, stranger.client]) {
        assert.equal((await repoListStatuses({ client, path: { owner: 'owner', repo: 'secret', sha } })).status, 404);
        assert.equal(
          (await repoGetCombinedStatusByRef({ client, path: { owner: 'owner', repo: 'secret', ref: 'main' } })).status,
          404,
        );
      }
      const anonymous = await repoCreateStatus({
        client: s.anonymous,
        path: { owner: 'owner', repo: 'pub', sha },
        body: { state: 'success' },
      });
      assert.equal(anonymous.status, 401);
      assert.equal((await create(stranger, sha, { state: 'success' })).status, 403);
      assert.equal((await create(owner, 'f'.repeat(40), { state: 'success' })).status, 404);
      assert.equal((await create(owner, 'main', { state: 'success' })).status, 404);
      // Nothing was written by the refused calls.
      const list = await answer(repoListStatuses({ client: owner.client, path: { owner: 'owner', repo: 'pub', sha } }));
      assert.equal(list.headers['x-total-count'], '3');
    });

    test('a push run writes a status per job on the pushed commit, follows the jobs, and the combined state with them; nothing is repeated', async () => {
      const build = 'CI / build (push)';
      const testCtx = 'CI / test (push)';
      let list = await ciStatuses();
      assert.deepEqual(list.map((st) => [st.context, st.status, st.description]).sort(), [
        [build, 'pending', 'Waiting to run'],
        [testCtx, 'pending', 'Waiting to run'],
      ]);
      const first = latest(list, build);
      assert.match(first?.target_url ?? '', new RegExp(`^${s.rootUrl}owner/ci/actions/runs/1/jobs/[01]$`));
      assert.equal(first?.creator?.login, 'forgejo-actions');
      assert.equal((await combinedCi()).state, 'pending');

      const tasks = [await fetchOne(), await fetchOne()];
      list = await ciStatuses();
      assert.equal(latest(list, build)?.description, 'Has started running');
      assert.equal(latest(list, testCtx)?.description, 'Has started running');
      const count = list.length;
      // A report that changes nothing writes nothing.
      for (const task of tasks) await update(task.id, Result.UNSPECIFIED, false);
      assert.equal((await ciStatuses()).length, count);

      const byJob = new Map(tasks.map((task) => [Object.keys(task.workflow.jobs)[0] ?? '', task]));
      await update(byJob.get('build')?.id ?? 0, Result.SUCCESS, true);
      list = await ciStatuses();
      assert.equal(latest(list, build)?.status, 'success');
      assert.match(latest(list, build)?.description ?? '', /^Successful in \d+s$/);
      assert.equal((await combinedCi()).state, 'pending');

      await update(byJob.get('test')?.id ?? 0, Result.FAILURE, true);
      list = await ciStatuses();
      assert.equal(latest(list, testCtx)?.status, 'failure');
      assert.match(latest(list, testCtx)?.description ?? '', /^Failing after \d+s$/);
      const combined = await combinedCi();
      assert.equal(combined.state, 'failure');
      assert.equal(combined.total_count, 2);
      // The two job pages of run 1.
      assert.deepEqual(
        list
          .map((st) => st.target_url.replace(/.*\/jobs\//, ''))
          .sort()
          .filter((v, i, a) => a.indexOf(v) === i),
        ['0', '1'],
      );
    });

    test('a dispatch run writes no status; its job token may write one on its own repository only', async () => {
      const before = (await ciStatuses()).length;
      const res = await s.api('POST', '/repos/owner/ci/actions/workflows/manual.yml/dispatches', {
        token: owner.token,
        body: { ref: 'main' },
      });
      assert.equal(res.status, 204, res.text);
      const task = await fetchOne();
      // The job's token (GITHUB_TOKEN) may write statuses on its own repository while it runs, not on another.
      const jobToken = String(task.context.token ?? task.secrets.GITHUB_TOKEN ?? '');
      assert.notEqual(jobToken, '');
      const own = await s.api('POST', `/repos/owner/ci/statuses/${pushed}`, {
        token: jobToken,
        body: { state: 'success', context: 'deploy' },
      });
      assert.equal(own.status, 201, own.text);
      assert.equal((own.json as StatusJson).creator?.login, 'forgejo-actions');
      assert.equal(
        (await s.api('POST', `/repos/owner/pub/statuses/${sha}`, { token: jobToken, body: { state: 'success' } }))
          .status,
        403,
      );
      await update(task.id, Result.SUCCESS, true);
      const after = await ciStatuses();
      // Only the job's own `deploy` status was added.
      assert.equal(after.length, before + 1);
      assert.ok(after.every((st) => !st.context.startsWith('Manual')));
    });

    test('each status of the push run is delivered as a `status` webhook to the repository hook', async () => {
      const ofCi = (received: ReceivedDelivery[]) =>
        received.filter((d) => d.path === '/ci' && d.headers['x-forgejo-event'] === 'status');
      // Deliveries run concurrently, so they may arrive in any order: wait for the one asserted on,
      // not for a count (the dispatch test's `deploy` status can arrive before the failure).
      const failure = (received: ReceivedDelivery[]) =>
        ofCi(received)
          .map((d) => d.json as Record<string, unknown>)
          .find((p) => p.state === 'failure');
      await receiver.waitFor((received) => failure(received) !== undefined);
      const payload = failure(receiver.received);
      assert.ok(payload, 'a failure status delivery');
      assert.equal(payload.sha, pushed);
      assert.equal(payload.context, 'CI / test (push)');
      assert.match(String(payload.description), /^Failing after/);
      assert.equal((payload.commit as { id: string }).id, pushed);
      assert.equal((payload.repository as { full_name: string }).full_name, 'owner/ci');
      assert.equal((payload.sender as { login: string }).login, 'forgejo-actions');
      for (const key of ['created_at', 'updated_at', 'id', 'target_url']) assert.ok(key in payload, key);
    });

    test('a status created through the API is delivered as a `status` webhook with the commit read from git and the creator as sender', async () => {
      const ofPub = (received: ReceivedDelivery[]) =>
        received.filter((d) => d.path === '/pub' && d.headers['x-forgejo-event'] === 'status');
      const ciTest = (received: ReceivedDelivery[]) =>
        ofPub(received)
          .map((d) => d.json as Record<string, unknown>)
          .find((p) => p.context === 'ci/test');
      await receiver.waitFor((received) => ciTest(received) !== undefined);
      const payload = ciTest(receiver.received);
      assert.ok(payload, 'the ci/test delivery');
      assert.equal(payload.state, 'failure');
      assert.equal(payload.sha, sha);
      assert.equal((payload.commit as { id: string; message: string }).id, sha);
      assert.match((payload.commit as { message: string }).message, /^First/);
      assert.equal((payload.sender as { login: string }).login, 'owner');
      assert.equal(payload.target_url, '');
    });

    test('cancelling a push run writes `Has been cancelled` (failure) for its jobs', async () => {
      const next = await ciWork.commit({ 'README.md': 'again\n' }, 'Again');
      assert.equal((await ciWork.push('main')).code, 0);
      const runs = await s.api('GET', `/repos/owner/ci/actions/runs?head_sha=${next}`, { token: owner.token });
      const runId = (runs.json as { workflow_runs: Array<{ id: number }> }).workflow_runs[0]?.id;
      assert.ok(runId, runs.text);
      assert.equal(
        (await s.api('POST', `/repos/owner/ci/actions/runs/${runId}/cancel`, { token: owner.token })).status,
        204,
      );
      const res = await repoListStatusesByRef({
        client: owner.client,
        path: { owner: 'owner', repo: 'ci', ref: 'main' },
        query: { sort: 'highestindex' },
      });
      const list = res.data as unknown as StatusJson[];
      for (const context of ['CI / build (push)', 'CI / test (push)']) {
        assert.deepEqual(
          [latest(list, context)?.status, latest(list, context)?.description],
          ['failure', 'Has been cancelled'],
          context,
        );
      }
      assert.match(latest(list, 'CI / build (push)')?.target_url ?? '', /\/actions\/runs\/3\/jobs\/[01]$/);
      assert.equal((await combinedCi()).state, 'failure');
    });

    test('concurrent POSTs on one commit get the numbers 1…n, each once', async () => {
      const fresh = await apiWork.commit({ 'notes.txt': 'n\n' }, 'Notes');
      assert.equal((await apiWork.push('main')).code, 0);
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => create(owner, fresh, { state: 'success', context: `ci/${i % 3}` })),
      );
      assert.deepEqual(
        answers.map((a) => a.status),
        Array(12).fill(201),
      );
      assert.deepEqual(
        answers.map((a) => (a.data as unknown as StatusJson).id).sort((x, y) => x - y),
        Array.from({ length: 12 }, (_, i) => i + 1),
      );
      const combined = await repoGetCombinedStatusByRef({
        client: owner.client,
        path: { owner: 'owner', repo: 'pub', ref: fresh },
      });
      assert.equal((combined.data as unknown as CombinedJson).total_count, 3);
    });
  });
}
