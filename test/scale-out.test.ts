// Scale-out: two `gantry web` processes on one PostgreSQL database and one
// data folder, behind nginx (round robin), under a mixed workload sent only
// through nginx — git pushes, workflow dispatches, secret and variable writes,
// 50 runner clients, organization webhooks to a local receiver. Afterwards:
// every job ran exactly once, run numbers are 1..N per repository, every
// webhook event arrived at least once under one delivery id, no request was
// answered 5xx, both processes served requests, and the work both processes
// did in the background (deliveries, log archiving) has no duplicated effect.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { openDatabase } from '../src/models/database.ts';
import type { DatabaseHandle, Db } from '../src/models/database.ts';
import { ActionStatus } from '../src/modules/actions-status.ts';
import { FLEET_ADMIN, startGantryFleet } from './support/gantry-fleet.ts';
import type { GantryFleet } from './support/gantry-fleet.ts';
import { HOOK_SECRET, LOG_LINES_PER_TASK, logLine, setUpMixedWorkload } from './support/mixed-workload.ts';
import type { MixedWorkload } from './support/mixed-workload.ts';
import { nginxMissingReason, nginxSkipReason } from './support/nginx.ts';
import { createScratchPgDatabase } from './support/pg-database.ts';
import type { ScratchPgDatabase } from './support/pg-database.ts';
import { testDialects } from './support/server.ts';
import { startWebhookReceiver, verifySignature } from './support/webhook-receiver.ts';
import type { WebhookReceiver } from './support/webhook-receiver.ts';

const SHAPE = { orgs: 2, reposPerOrg: 2, runners: 50 };
/** Per repository, after the first push that adds the workflow. */
const PUSHES = 5;
const DISPATCHES = 6;
/** Rounds of concurrent secret and variable writes per organization and per repository. */
const SETTINGS_ROUNDS = 3;
const DRAIN_DEADLINE_MS = 120_000;
const DELIVERY_DEADLINE_MS = 90_000;

function skipReason(): string | false {
  if (!testDialects().includes('postgres') || !process.env.GANTRY_TEST_PG_URL)
    return 'needs PostgreSQL (run through scripts/run-tests.ts without --sqlite-only)';
  return nginxSkipReason();
}

/**
 * What makes a webhook event itself, so that two deliveries of one event
 * under different ids can be told from two events: a push by its commit, a
 * workflow run or job by its id, action and attempt; anything else by body.
 */
function eventIdentity(event: string, json: unknown, rawBody: Buffer): string {
  const payload = (json ?? {}) as {
    action?: string;
    after?: string;
    repository?: { full_name?: string };
    workflow_run?: { id?: number; run_attempt?: number };
    workflow_job?: { id?: number; run_attempt?: number };
  };
  if (event === 'push') return `push ${payload.repository?.full_name}@${payload.after}`;
  if (event === 'workflow_run')
    return `workflow_run ${payload.workflow_run?.id} ${payload.action} attempt ${payload.workflow_run?.run_attempt}`;
  if (event === 'workflow_job')
    return `workflow_job ${payload.workflow_job?.id} ${payload.action} attempt ${payload.workflow_job?.run_attempt}`;
  return `${event} ${rawBody.toString('utf8')}`;
}

async function eventually(what: string, deadlineMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${deadlineMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Runs `count` calls of `step` one after another. */
async function inSequence(count: number, step: () => Promise<void>): Promise<void> {
  for (let i = 0; i < count; i += 1) await step();
}

describe('scale-out: two Gantry processes on PostgreSQL behind nginx', { skip: skipReason() }, () => {
  let scratch: ScratchPgDatabase;
  let fleet: GantryFleet;
  let receiver: WebhookReceiver;
  let database: DatabaseHandle;
  let workload: MixedWorkload;
  const db = (): Db => database.db;

  before(async () => {
    const missing = nginxMissingReason();
    if (missing !== null) throw new Error(`${missing}; CI is set, so this test must not be skipped`);
    scratch = await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL as string);
    receiver = await startWebhookReceiver();
    fleet = await startGantryFleet({
      processes: 2,
      databaseUrl: scratch.url,
      env: { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' },
    });
    database = openDatabase({ databaseUrl: scratch.url, dataDir: fleet.dataDir, maxConnections: 2 });
  });

  after(async () => {
    await workload?.remove();
    await database?.destroy();
    await fleet?.stop();
    await receiver?.close();
    await scratch?.drop();
  });

  test(
    'a mixed workload through nginx: jobs run once, run numbers are gap-free, webhooks arrive once each, no 5xx',
    { timeout: 300_000 },
    async () => {
      const started = Date.now();
      workload = await setUpMixedWorkload({
        url: fleet.url,
        adminToken: fleet.adminToken,
        adminName: FLEET_ADMIN.name,
        shape: SHAPE,
        hookUrl: receiver.url,
      });
      const setUpSec = (Date.now() - started) / 1000;

      // Which processes hold webhook deliveries while they are sent (the lease owner names the pid).
      const leaseOwners = new Map<string, number>();
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          // Informational only: a failed sample (the database closing after a failure) ends it.
          const leased = await db()
            .selectFrom('hook_task')
            .select('lease_owner')
            .where('status', '=', 1)
            .execute()
            .catch(() => null);
          if (leased === null) return;
          for (const { lease_owner } of leased) leaseOwners.set(lease_owner, (leaseOwners.get(lease_owner) ?? 0) + 1);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();

      const swarm = workload.startRunners();
      const stopSampling = async () => {
        sampling = false;
        await sampler;
      };
      try {
        const scopes = [
          ...workload.orgs.map((org) => `orgs/${org}`),
          ...workload.repos.map((repo) => `repos/${repo.fullName}`),
        ];
        // The first push adds the workflow; dispatches need it on main.
        await Promise.all(workload.repos.map((repo) => workload.push(repo)));
        await Promise.all([
          ...workload.repos.map((repo) => inSequence(PUSHES, () => workload.push(repo))),
          // Two dispatchers per repository: run numbers are contended within a repository too.
          ...workload.repos.flatMap((repo) =>
            [0, 1].map(() => inSequence(DISPATCHES / 2, () => workload.dispatch(repo))),
          ),
          ...scopes.map((scope) => inSequence(SETTINGS_ROUNDS, () => workload.writeSettings(scope))),
        ]);
        const repoIds = await db().selectFrom('repository').select('id').execute();
        await eventually('every job finished', DRAIN_DEADLINE_MS, async () => {
          const open = await db()
            .selectFrom('action_run_job')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('status', 'in', [ActionStatus.waiting, ActionStatus.running, ActionStatus.blocked])
            .where(
              'repo_id',
              'in',
              repoIds.map((r) => r.id),
            )
            .executeTakeFirstOrThrow();
          return Number(open.n) === 0;
        }).catch(async (error: unknown) => {
          const stuck = await db()
            .selectFrom('action_run_job')
            .select(['id', 'run_id', 'name', 'status', 'task_id'])
            .where('status', 'in', [ActionStatus.waiting, ActionStatus.running, ActionStatus.blocked])
            .execute();
          const handed = new Set(workload.handledTasks.map((t) => t.taskId));
          const lost = stuck.filter((job) => job.task_id !== 0 && !handed.has(job.task_id)).map((job) => job.task_id);
          throw new Error(
            `${String(error)}; unfinished jobs: ${JSON.stringify(stuck)}; tasks claimed but never received by a runner: ${lost.join(', ') || 'none'}; ` +
              `violations: ${workload.violations.join('; ')}; requests: ${workload.tally.summary()}\n${fleet.output()}`,
          );
        });
      } catch (error) {
        await stopSampling();
        throw error;
      } finally {
        await swarm.stop();
      }
      const workloadSec = (Date.now() - started) / 1000 - setUpSec;
      assert.deepEqual(workload.violations, [], 'every answer kept its guarantee');

      // Runs: one per successful push and dispatch, numbered 1..N in each repository.
      const repoRows = await db().selectFrom('repository').select(['id', 'owner_name', 'name']).execute();
      const repoIdOf = new Map(repoRows.map((r) => [`${r.owner_name}/${r.name}`, r.id]));
      let totalRuns = 0;
      for (const repo of workload.repos) {
        const repoId = repoIdOf.get(repo.fullName);
        assert.ok(repoId !== undefined, repo.fullName);
        const runs = await db()
          .selectFrom('action_run')
          .select(['index_in_repo', 'event', 'status'])
          .where('repo_id', '=', repoId)
          .orderBy('index_in_repo')
          .execute();
        const numbers = runs.map((r) => Number(r.index_in_repo));
        assert.deepEqual(
          numbers,
          Array.from({ length: numbers.length }, (_, i) => i + 1),
          `${repo.fullName}: run numbers are 1..N with no gap or duplicate`,
        );
        assert.equal(
          runs.filter((r) => r.event === 'push').length,
          repo.pushedShas.length,
          `${repo.fullName}: one run per push`,
        );
        assert.equal(
          runs.filter((r) => r.event === 'workflow_dispatch').length,
          repo.dispatchedRunNumbers.length,
          `${repo.fullName}: one run per dispatch`,
        );
        assert.ok(
          repo.dispatchedRunNumbers.every((n) => numbers.includes(n)),
          `${repo.fullName}: dispatch answers name real runs`,
        );
        assert.equal(
          new Set(repo.dispatchedRunNumbers).size,
          repo.dispatchedRunNumbers.length,
          `${repo.fullName}: no run number answered twice`,
        );
        assert.ok(
          runs.every((r) => r.status === ActionStatus.success),
          `${repo.fullName}: every run succeeded`,
        );
        const listed = await fetch(`${fleet.url}/api/v1/repos/${repo.fullName}/actions/runs?limit=1`, {
          headers: { authorization: `token ${fleet.adminToken}` },
        });
        assert.equal(
          ((await listed.json()) as { total_count: number }).total_count,
          runs.length,
          `${repo.fullName}: the runs list counts them all`,
        );
        totalRuns += runs.length;
      }

      // Jobs: each ran exactly once — one task, finished, handed to one runner once.
      const jobs = await db().selectFrom('action_run_job').select(['id', 'status', 'task_id']).execute();
      const tasks = await db()
        .selectFrom('action_task')
        .select(['id', 'job_id', 'status', 'runner_id', 'log_in_storage', 'log_filename', 'log_length'])
        .execute();
      assert.equal(jobs.length, totalRuns * 2, 'two jobs per run');
      assert.ok(
        jobs.every((job) => job.status === ActionStatus.success),
        'every job succeeded',
      );
      assert.equal(tasks.length, jobs.length, 'one task per job');
      assert.deepEqual(new Set(tasks.map((t) => t.job_id)), new Set(jobs.map((j) => j.id)));
      assert.deepEqual(
        new Set(jobs.map((j) => j.task_id)),
        new Set(tasks.map((t) => t.id)),
        "each job's task is its only task",
      );
      assert.ok(tasks.every((t) => t.status === ActionStatus.success));
      const handed = workload.handledTasks.map((t) => t.taskId);
      assert.equal(handed.length, tasks.length, 'the runners received as many tasks as exist');
      assert.deepEqual(new Set(handed), new Set(tasks.map((t) => t.id)), 'no task was handed out twice');
      const runnerOf = new Map(workload.handledTasks.map((t) => [t.taskId, t.runnerId]));
      assert.ok(
        tasks.every((t) => runnerOf.get(t.id) === t.runner_id),
        'each task is recorded for the runner that received it',
      );

      // Logs, appended by either process and archived once: exactly the lines sent, in order.
      for (const task of tasks) {
        assert.equal(Number(task.log_in_storage), 1, `task ${task.id}: log archived`);
        assert.equal(Number(task.log_length), LOG_LINES_PER_TASK, `task ${task.id}: log length`);
        const text = gunzipSync(await fs.readFile(path.join(fleet.dataDir, 'actions_log', task.log_filename))).toString(
          'utf8',
        );
        const lines = text
          .trimEnd()
          .split('\n')
          .map((line) => line.replace(/^\S+ /, ''));
        assert.deepEqual(
          lines,
          Array.from({ length: LOG_LINES_PER_TASK }, (_, i) => logLine(task.id, i)),
          `task ${task.id}: stored log`,
        );
      }

      // Webhooks: every outbox row delivered, seen by the receiver under its one delivery id.
      await eventually('every webhook delivery settled and received', DELIVERY_DEADLINE_MS, async () => {
        const pending = await db()
          .selectFrom('hook_task')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('status', '!=', 2)
          .executeTakeFirstOrThrow();
        const uuids = await db().selectFrom('hook_task').select('uuid').execute();
        const seen = new Set(receiver.received.map((d) => d.headers['x-forgejo-delivery'] as string));
        return Number(pending.n) === 0 && uuids.every((u) => seen.has(u.uuid));
      }).finally(stopSampling);
      const hookTasks = await db().selectFrom('hook_task').select(['uuid', 'event_type', 'attempts']).execute();
      const bodiesById = new Map<string, Set<string>>();
      for (const delivery of receiver.received) {
        const id = delivery.headers['x-forgejo-delivery'] as string;
        assert.ok(
          verifySignature(HOOK_SECRET, delivery.rawBody, delivery.headers['x-forgejo-signature'] as string),
          `delivery ${id} is signed`,
        );
        const bodies = bodiesById.get(id) ?? new Set<string>();
        bodies.add(delivery.rawBody.toString('utf8'));
        bodiesById.set(id, bodies);
      }
      assert.deepEqual(
        new Set(bodiesById.keys()),
        new Set(hookTasks.map((t) => t.uuid)),
        'the receiver saw exactly the outbox rows',
      );
      assert.ok(
        [...bodiesById.values()].every((bodies) => bodies.size === 1),
        'a delivery id always carries the same body',
      );
      for (const org of workload.orgs) {
        const idsByEvent = new Map<string, Set<string>>();
        for (const d of receiver.received.filter((r) => r.path === `/${org}`)) {
          const key = eventIdentity(d.headers['x-forgejo-event'] as string, d.json, d.rawBody);
          const ids = idsByEvent.get(key) ?? new Set<string>();
          ids.add(d.headers['x-forgejo-delivery'] as string);
          idsByEvent.set(key, ids);
        }
        const twice = [...idsByEvent].filter(([, ids]) => ids.size > 1).map(([key]) => key);
        assert.deepEqual(twice, [], `${org}: each event has one delivery id`);
        const pushed = workload.repos
          .filter((r) => r.org === org)
          .flatMap((r) => r.pushedShas.map((sha) => `push ${r.fullName}@${sha}`));
        assert.deepEqual(
          new Set([...idsByEvent.keys()].filter((key) => key.startsWith('push '))),
          new Set(pushed),
          `${org}: one push event per push`,
        );
      }

      // Settings: the names written exist once each, whichever process wrote them.
      for (const [scope, names] of workload.createdNames) {
        for (const [kind, expected] of [
          ['secrets', names.secrets],
          ['variables', names.variables],
        ] as const) {
          const res = await fetch(`${fleet.url}/api/v1/${scope}/actions/${kind}?limit=1`, {
            headers: { authorization: `token ${fleet.adminToken}` },
          });
          assert.equal(res.status, 200);
          assert.equal(Number(res.headers.get('x-total-count')), expected.size, `${scope}: ${kind}`);
        }
      }

      // No 5xx anywhere: neither in what the clients saw nor in nginx's log (git included).
      assert.deepEqual(workload.tally.serverErrors, [], 'no client saw a 5xx');
      const access = await fleet.nginx.readAccessLog();
      const fiveXX = access.filter((e) => e.status >= 500);
      assert.deepEqual(fiveXX, [], `no 5xx through nginx\n${fleet.output()}`);
      // Round robin: both processes served a fair share.
      const served = new Map<string, number>();
      for (const entry of access)
        for (const upstream of entry.upstream.split(', ')) served.set(upstream, (served.get(upstream) ?? 0) + 1);
      const answered = fleet.processes.map((p) => served.get(p.address) ?? 0);
      const total = answered.reduce((a, b) => a + b, 0);
      assert.ok(
        answered.every((n) => n >= total / 3),
        `both processes served requests: ${answered.join(' / ')}`,
      );

      const pidOf = new Map(fleet.processes.map((p, i) => [String(p.child.pid), i]));
      const leasedBy = [...leaseOwners.entries()].map(
        ([owner, samples]) => `process ${pidOf.get(owner.split(':')[1] ?? '') ?? '?'}: ${samples} samples`,
      );
      const events = new Map<string, number>();
      for (const t of hookTasks) events.set(t.event_type, (events.get(t.event_type) ?? 0) + 1);
      const fetches = [...workload.fetchMs].sort((a, b) => a - b);
      console.log(
        `[scale-out] FetchTask p50 ${Math.round(fetches[fetches.length >> 1] ?? 0)} ms, max ${Math.round(fetches[fetches.length - 1] ?? 0)} ms; set-up ${setUpSec.toFixed(1)} s, workload ${workloadSec.toFixed(1)} s; ${totalRuns} runs, ${jobs.length} jobs; ` +
          `${hookTasks.length} deliveries (${[...events].map(([e, n]) => `${e} ${n}`).join(', ')}; hook events ${workload.hookEvents.join(',')}), ` +
          `${hookTasks.filter((t) => Number(t.attempts) > 1).length} retried; leases seen: ${leasedBy.join(', ') || 'none sampled'}; ` +
          `requests per process ${answered.join(' / ')}; ${workload.tally.summary()}`,
      );
    },
  );
});
