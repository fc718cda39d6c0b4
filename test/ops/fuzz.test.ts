// Property-based bad input across every route: thousands of random and
// malformed requests (path segments, query strings, JSON and not-JSON bodies,
// credentials, oversized headers, methods), sent concurrently over keep-alive
// connections to a real server holding real data. Property: never a 5xx,
// never a hang, a well-formed error body; afterwards the server is healthy,
// still works, and logged no error.
//
// Reproducible: a fixed seed and number of batches by default; a failure
// prints the seed and fast-check's path of the shrunk batch. Overrides:
//   GANTRY_FUZZ_SEED=42 GANTRY_FUZZ_RUNS=2000 node --import tsx scripts/run-tests.ts test/ops/fuzz.test.ts
//   GANTRY_FUZZ_SEED=42 GANTRY_FUZZ_PATH='17:3:1' …   replays one failing batch
//   GANTRY_FUZZ_SECONDS=600 …                        a longer time cap
//   GANTRY_FUZZ_SURVEY=1 …                           lists every distinct failure instead of stopping at the first
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import type { Agent } from 'undici';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';
import { requestArbitrary } from './fuzz/requests.ts';
import type { FuzzRequest } from './fuzz/world.ts';
import { createFixture, SCRATCH_ORG, SCRATCH_REPOS } from './fuzz/fixtures.ts';
import type { Fixture } from './fuzz/fixtures.ts';
import { createAgent, judge, send } from './fuzz/http.ts';
import type { FuzzAnswer } from './fuzz/http.ts';
import { fuzzRoutes, undocumentedOrMissing } from './fuzz/routes.ts';
import type { FuzzRoute } from './fuzz/routes.ts';

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return value;
}

const SEED = envInt('GANTRY_FUZZ_SEED', 20_150_315);
/** Batches of up to BATCH concurrent requests: about 3,700 requests, 35-40 s per database on two idle cores. */
const RUNS = envInt('GANTRY_FUZZ_RUNS', 600);
const BATCH = 12;
/** A cap, so a machine busy with other work ends the run early (and says so) instead of timing out. */
const SECONDS = envInt('GANTRY_FUZZ_SECONDS', 45);
const REPLAY_PATH = process.env.GANTRY_FUZZ_PATH || undefined;
const SURVEY = process.env.GANTRY_FUZZ_SURVEY === '1';
/** Whatever the machine, fewer requests than this means the generator or the server is broken. */
const MIN_REQUESTS = 300;
/** Fewer routes than this means the route table was not read right (the server has well over a hundred). */
const MIN_ROUTES = 100;

interface Failure {
  request: FuzzRequest;
  problem: string;
}

interface Stats {
  requests: number;
  byStatus: Map<number, number>;
  routesReached: Set<string>;
  slowestMs: number;
  /** Total milliseconds per route, to see where the time goes. */
  msByRoute: Map<string, number>;
}

function shorten(value: string, max = 240): string {
  return value.length <= max ? value : `${value.slice(0, max)}… (${value.length} chars)`;
}

function describeRequest(request: FuzzRequest): string {
  const headers = Object.entries(request.headers).map(
    ([k, v]) => `${k}: ${shorten(Array.isArray(v) ? v.join(' | ') : v, 120)}`,
  );
  const body = request.body === null ? '(no body)' : shorten(JSON.stringify(request.body.toString('latin1')), 300);
  return [
    `${request.method} ${shorten(request.path, 400)}   [route ${request.route}, as ${request.auth}]`,
    ...headers.map((h) => `  ${h}`),
    `  body: ${body}`,
  ].join('\n');
}

const isScratchTarget = (request: FuzzRequest): boolean =>
  (request.method === 'DELETE' || request.method === 'PATCH') &&
  (SCRATCH_REPOS.some((name) => request.path.startsWith(`/api/v1/repos/alice/${name}`)) ||
    request.path.startsWith(`/api/v1/orgs/${SCRATCH_ORG}`));

for (const dialect of testDialects()) {
  describe(`fuzz: bad input on every route [${dialect}]`, () => {
    let s: TestServer;
    let fixture: Fixture;
    let routes: FuzzRoute[];
    let agent: Agent;
    let logFile: string;
    let openapi: { paths: Record<string, Record<string, unknown>> };

    before(async () => {
      logFile = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-fuzz-log-')), 'server.log');
      s = await startTestServer(dialect, { GANTRY_LOG_LEVEL: 'warn' }, { logFile });
      fixture = await createFixture(s);
      openapi = (await (await fetch(`${s.url}/swagger.v1.json`)).json()) as typeof openapi;
      routes = fuzzRoutes(s.server.app, openapi as never);
      agent = createAgent();
    });

    after(async () => {
      await agent?.close();
      await s?.stop();
      if (logFile) await fs.rm(path.dirname(logFile), { recursive: true, force: true });
    });

    test('the route table covers the API, git over HTTP and the runner protocol', () => {
      const templates = new Set(routes.map((r) => r.template));
      assert.ok(
        routes.length >= MIN_ROUTES,
        `only ${routes.length} method/route pairs found: the route table was not read right`,
      );
      for (const expected of [
        '/api/healthz',
        '/api/v1/version',
        '/api/v1/repos/:owner/:repo/actions/runs/:run_id',
        '/:owner/:repo/info/refs',
        '/:owner/:repo/git-upload-pack',
        '/:owner/:repo/git-receive-pack',
        '/api/actions/ping.v1.PingService/Ping',
        '/api/actions/runner.v1.RunnerService/UpdateLog',
      ]) {
        assert.ok(templates.has(expected), `${expected} is not in the route table`);
      }
      assert.deepEqual(undocumentedOrMissing(routes, openapi), []);
      const withBodies = routes.filter((r) => r.body !== null).length;
      assert.ok(withBodies >= 20, `only ${withBodies} routes have a request schema in the OpenAPI document`);
    });

    test('random and malformed requests never get a 5xx or hang', { timeout: (SECONDS + 600) * 1000 }, async (t) => {
      const stats: Stats = {
        requests: 0,
        byStatus: new Map(),
        routesReached: new Set(),
        slowestMs: 0,
        msByRoute: new Map(),
      };
      let lastFailures: Failure[] = [];
      // A hang is often another request's doing (one left its keep-alive connection unusable), so a
      // failing batch is kept whole: the report lists what else was sent alongside.
      let lastBatch: string[] = [];
      const surveyed = new Map<string, Failure>();
      // Routes that read a body have more to get wrong: they are drawn twice as often.
      const weighted = routes.map((route) => ({
        weight: route.body !== null || route.kind === 'rpc' || route.kind === 'git' ? 2 : 1,
        arbitrary: requestArbitrary(route, fixture.world),
      }));
      const batch = fc.array(fc.oneof(...weighted), { minLength: 1, maxLength: BATCH });
      const property = fc.asyncProperty(batch, async (requests) => {
        const answers = await Promise.all(requests.map((request) => send(agent, s.url, request)));
        const failures: Failure[] = [];
        answers.forEach((answer: FuzzAnswer | string, i) => {
          const request = requests[i] as FuzzRequest;
          stats.requests += 1;
          if (typeof answer !== 'string') {
            stats.byStatus.set(answer.status, (stats.byStatus.get(answer.status) ?? 0) + 1);
            stats.slowestMs = Math.max(stats.slowestMs, answer.ms);
            stats.msByRoute.set(request.route, (stats.msByRoute.get(request.route) ?? 0) + answer.ms);
            if (answer.status < 400) stats.routesReached.add(request.route);
          }
          const problem = judge(request, answer);
          if (problem !== null) failures.push({ request, problem });
        });
        if (
          requests.some(
            (r, i) => isScratchTarget(r) && typeof answers[i] !== 'string' && (answers[i] as FuzzAnswer).status < 300,
          )
        )
          await fixture.replenish();
        if (failures.length === 0) return true;
        if (SURVEY) {
          for (const f of failures)
            surveyed.set(`${f.request.route} ${f.problem.replace(/\d+/g, '#').slice(0, 60)}`, f);
          return true;
        }
        lastFailures = failures;
        lastBatch = requests.map((r, i) => {
          const answer = answers[i] as FuzzAnswer | string;
          return `${describeRequest(r).split('\n')[0]}  → ${typeof answer === 'string' ? answer : `${answer.status} in ${answer.ms} ms`}`;
        });
        return false;
      });
      const started = Date.now();
      const details = await fc.check(property, {
        seed: SEED,
        numRuns: RUNS,
        interruptAfterTimeLimit: SECONDS * 1000,
        markInterruptAsFailure: false,
        ...(REPLAY_PATH !== undefined ? { path: REPLAY_PATH } : {}),
      });
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const statuses = [...stats.byStatus.entries()]
        .sort(([a], [b]) => a - b)
        .map(([k, v]) => `${k}×${v}`)
        .join(' ');
      t.diagnostic(
        `${stats.requests} requests in ${seconds} s (${details.numRuns} of ${RUNS} batches${details.interrupted ? `, stopped by the ${SECONDS} s cap` : ''}, seed ${SEED}); ` +
          `2xx/3xx on ${stats.routesReached.size} of ${routes.length} routes; slowest ${stats.slowestMs} ms`,
      );
      t.diagnostic(`statuses: ${statuses}`);
      const unreached = routes.map((r) => `${r.method} ${r.template}`).filter((r) => !stats.routesReached.has(r));
      t.diagnostic(`never answered below 400: ${unreached.join(', ')}`);
      const costliest = [...stats.msByRoute.entries()].sort(([, a], [, b]) => b - a).slice(0, 6);
      t.diagnostic(
        `most time spent on: ${costliest.map(([route, ms]) => `${route} ${(ms / 1000).toFixed(1)} s`).join(', ')}`,
      );
      if (surveyed.size > 0)
        assert.fail([...surveyed.values()].map((f) => `${describeRequest(f.request)}\n  → ${f.problem}`).join('\n\n'));
      if (details.failed) {
        const report = [
          `fuzz failure [${dialect}] — replay with GANTRY_FUZZ_SEED=${SEED} GANTRY_FUZZ_PATH='${details.counterexamplePath ?? ''}' (shrunk ${details.numShrinks} times):`,
          ...lastFailures.map((f) => `${describeRequest(f.request)}\n  → ${f.problem}`),
          details.errorInstance ? `property error: ${String(details.errorInstance)}` : '',
          `the whole batch, sent at once over the same keep-alive connections:\n${lastBatch.join('\n')}`,
        ].join('\n\n');
        assert.fail(report);
      }
      if (REPLAY_PATH === undefined)
        assert.ok(stats.requests >= Math.min(MIN_REQUESTS, RUNS), `only ${stats.requests} requests were sent`);
    });

    test('afterwards the server is healthy and still serves normal requests', async () => {
      const health = await fetch(`${s.url}/api/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: 'pass' });
      const version = await s.api('GET', '/version');
      assert.equal(version.status, 200);
      const token = await s.tokenFor(fixture.user, ['all']);
      const created = await s.api('POST', '/user/repos', { token, body: { name: 'after-the-fuzz', auto_init: true } });
      assert.equal(created.status, 201, created.text);
      const read = await s.api('GET', '/repos/alice/after-the-fuzz', { token });
      assert.equal(read.status, 200, read.text);
      const refs = await fetch(`${s.url}/alice/after-the-fuzz.git/info/refs?service=git-upload-pack`, {
        headers: { authorization: `token ${token}` },
      });
      assert.equal(refs.status, 200);
      assert.match(await refs.text(), /refs\/heads\//);
    });

    test('the server logged no error while being fuzzed', async () => {
      const lines = (await fs.readFile(logFile, 'utf8')).split('\n').filter(Boolean);
      const errors = lines
        .map((line) => JSON.parse(line) as { level: number; msg?: string; err?: { message?: string; stack?: string } })
        .filter((entry) => entry.level >= 50);
      // Each distinct cause once, with the frames that locate it.
      const causes = new Map(
        errors.map((e) => [
          `${e.msg ?? ''}: ${e.err?.message ?? ''}`,
          (e.err?.stack ?? '').split('\n').slice(0, 6).join('\n'),
        ]),
      );
      assert.deepEqual(
        [...causes.entries()].map(([cause, stack]) => `${cause}\n${stack}`),
        [],
        `${errors.length} error lines in the server log`,
      );
    });
  });
}
