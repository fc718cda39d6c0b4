// The world the fuzzer attacks, built over the public API as a user would:
// an admin and a normal user, an organization with a team, repositories (one
// with pushed workflows, so runs, jobs and a running task exist), runners,
// webhooks with a delivery, secrets and variables at every scope, and
// disposable things DELETE and PATCH may destroy.
import assert from 'node:assert/strict';
import { registerRunner } from '../../support/runner-client.ts';
import { basicAuth } from '../../support/server.ts';
import type { TestServer, TestUser } from '../../support/server.ts';
import { createWorkDir, remoteUrl } from '../../support/workdir.ts';
import type { FuzzWorld } from './world.ts';

const WORKFLOW = `on:
  push: { branches: [main] }
  workflow_dispatch: { inputs: { target: { required: false } } }
jobs:
  build: { runs-on: fuzz, steps: [ { run: echo build } ] }
  test: { runs-on: fuzz, needs: [build], steps: [ { run: echo test } ] }
`;

export const SCRATCH_REPOS = ['scratch-1', 'scratch-2', 'scratch-3'];
export const SCRATCH_ORG = 'scratch-org';

export interface Fixture {
  world: FuzzWorld;
  user: TestUser;
  /** Recreates the disposable repositories and organization that requests deleted or renamed. */
  replenish(): Promise<void>;
}

async function ok(s: TestServer, method: string, path: string, token: string, body?: unknown): Promise<unknown> {
  const res = await s.api(method, path, { token, ...(body === undefined ? {} : { body }) });
  assert.ok(res.status >= 200 && res.status < 300, `${method} ${path} → ${res.status} ${res.text}`);
  return res.json;
}

export async function createFixture(s: TestServer): Promise<Fixture> {
  const admin = s.admin;
  const user = await s.createUser('alice');
  await s.createUser('bob');
  const t = user.token;

  await ok(s, 'POST', '/orgs', t, { username: 'acme' });
  await ok(s, 'POST', '/user/repos', t, { name: 'app', auto_init: false });
  await ok(s, 'POST', '/orgs/acme/repos', t, {
    name: 'builds',
    private: true,
    auto_init: true,
    default_branch: 'main',
  });
  await ok(s, 'POST', '/user/repos', admin.token, { name: 'vault', private: true, auto_init: true });
  const team = (await ok(s, 'POST', '/orgs/acme/teams', t, {
    name: 'devs',
    permission: 'write',
    units: ['repo.code', 'repo.actions'],
  })) as { id: number };

  const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: t }));
  let sha: string;
  try {
    sha = await work.commit({ '.forgejo/workflows/ci.yml': WORKFLOW, 'README.md': 'fuzz\n' }, 'Add CI');
    const pushed = await work.push('main');
    assert.equal(pushed.code, 0, pushed.stderr);
  } finally {
    await work.remove();
  }
  const dispatched = (await ok(s, 'POST', '/repos/alice/app/actions/workflows/ci.yml/dispatches', t, {
    ref: 'main',
    inputs: { target: 'x' },
    return_run_info: true,
  })) as { id: number };
  const runs = (await ok(s, 'GET', '/repos/alice/app/actions/runs', t)) as { workflow_runs: { id: number }[] };
  assert.ok(runs.workflow_runs.length >= 2, 'the push and the dispatch made runs');

  const registration = (await ok(s, 'GET', '/repos/alice/app/actions/runners/registration-token', t)) as {
    token: string;
  };
  const keeper = await registerRunner(s.url, registration.token, { name: 'fuzz-keeper', labels: ['fuzz'] });
  const spare = await registerRunner(s.url, registration.token, { name: 'fuzz-spare', labels: ['other'] });
  // Runners of the other scopes too, so every runners route has one to find.
  const scopeRunners: string[] = [];
  for (const [path, token] of [
    ['/user/actions/runners/registration-token', t],
    ['/orgs/acme/actions/runners/registration-token', t],
    ['/admin/actions/runners/registration-token', admin.token],
  ] as const) {
    const scoped = (await ok(s, 'GET', path, token)) as { token: string };
    scopeRunners.push(String((await registerRunner(s.url, scoped.token, { labels: ['elsewhere'] })).credentials?.id));
  }
  const fetched = await keeper.runner.fetchTask({ tasksVersion: 0n });
  assert.ok(fetched.task, 'the keeper runner took a job');
  const credentials = keeper.credentials;
  assert.ok(credentials && spare.credentials);

  const hookBody = {
    type: 'forgejo',
    config: { url: 'http://example.invalid/hook', content_type: 'json' },
    events: ['push'],
    active: true,
  };
  const hook = (await ok(s, 'POST', '/orgs/acme/hooks', t, hookBody)) as { id: number };
  const spareHook = (await ok(s, 'POST', '/orgs/acme/hooks', t, hookBody)) as { id: number };
  const delivery = (await ok(s, 'POST', `/orgs/acme/hooks/${hook.id}/pings`, t)) as { id: number };
  const repoHook = (await ok(s, 'POST', '/repos/alice/app/hooks', t, hookBody)) as { id: number };
  const repoDelivery = (await ok(s, 'POST', `/repos/alice/app/hooks/${repoHook.id}/pings`, t)) as { id: number };

  for (const base of ['/user/actions', '/orgs/acme/actions', '/repos/alice/app/actions']) {
    await ok(s, 'PUT', `${base}/secrets/FUZZ_SECRET`, t, { data: 's3cret' });
    await ok(s, 'POST', `${base}/variables/FUZZ_VAR`, t, { value: 'v' });
  }
  const created = await s.api('POST', '/users/alice/tokens', {
    authorization: basicAuth('alice', user.password),
    body: { name: 'disposable', scopes: ['all'] },
  });
  assert.equal(created.status, 201, created.text);
  const disposableToken = created.json as { id: number; name: string };

  const replenish = async (): Promise<void> => {
    for (const name of SCRATCH_REPOS) {
      if ((await s.api('GET', `/repos/alice/${name}`, { token: t })).status === 404)
        await ok(s, 'POST', '/user/repos', t, { name, auto_init: true });
    }
    if ((await s.api('GET', `/orgs/${SCRATCH_ORG}`, { token: t })).status === 404)
      await ok(s, 'POST', '/orgs', t, { username: SCRATCH_ORG });
  };
  await replenish();

  const world: FuzzWorld = {
    identities: {
      admin: { name: admin.name, password: admin.password, token: admin.token },
      user: { name: user.name, password: user.password, token: t },
    },
    runner: { uuid: credentials.uuid, token: credentials.token },
    pools: {
      owner: ['alice', 'acme', 'root'],
      repo: ['app', 'builds', 'vault'],
      org: ['acme', SCRATCH_ORG],
      username: ['alice', 'root', 'bob'],
      collaborator: ['bob', 'alice', 'root', 'acme'],
      token: [disposableToken.name, String(disposableToken.id)],
      secretname: ['FUZZ_SECRET', 'fuzz_secret', 'GITEA_X'],
      variablename: ['FUZZ_VAR', 'fuzz_var', 'CI'],
      runner_id: [String(credentials.id), String(spare.credentials.id), ...scopeRunners],
      run_id: runs.workflow_runs.map((r) => String(r.id)).concat(String(dispatched.id)),
      workflowfilename: ['ci.yml', 'ci.yaml', 'missing.yml'],
      id: [String(team.id), String(hook.id), String(spareHook.id), String(repoHook.id)],
      delivery_id: [String(delivery.id), String(repoDelivery.id)],
      '*': ['index.html', 'swagger-initializer.js', 'static/index.html'],
    },
    repos: {
      existing: [
        ['alice', 'app'],
        ['acme', 'builds'],
        ['root', 'vault'],
      ],
      disposable: SCRATCH_REPOS.map((name) => ['alice', name] as [string, string]),
    },
    disposable: {
      owner: ['alice'],
      repo: SCRATCH_REPOS,
      org: [SCRATCH_ORG],
      runner_id: [String(spare.credentials.id), ...scopeRunners],
      id: [String(spareHook.id), String(team.id)],
      // Deleted now and then, and put back by the PUT and POST requests.
      secretname: ['FUZZ_SECRET'],
      variablename: ['FUZZ_VAR', 'fuzz_var'],
      collaborator: ['bob'],
      username: ['bob'],
      token: [disposableToken.name],
    },
    values: {
      sha,
      taskId: String(fetched.task.id),
      runnerUuid: spare.credentials.uuid,
      registrationToken: registration.token,
      labels: ['fuzz', 'other', 'fuzz,other', ''],
    },
  };
  return { world, user, replenish };
}
