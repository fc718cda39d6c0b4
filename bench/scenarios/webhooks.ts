// Webhooks at scale, two figures:
// 1. Deliveries per second out of a backlog (target ≥ 1,000/s). An organization
//    has 100 hooks; git pushes to its repository queue N deliveries (default
//    5,000: 50 pushes × 100 hooks) while the receiver holds its answers, so the
//    worker's slots stay full and the rest waits in the outbox. The receiver
//    then answers everything, and the rate runs from that moment to the last
//    arrival. Baseline: the receiver's own capacity, a plain undici client
//    POSTing a captured delivery (same bytes, same headers) with the worker's
//    concurrency (GANTRY_WEBHOOK_CONCURRENCY, default 8).
// 2. What 100 matching hooks add to a `git push`: the client's wall time of
//    `git push` to a repository whose organization has 100 hooks, against the
//    same push to one whose organization has none, alternating, each push on a
//    quiet server (the previous push's deliveries have arrived).
//
// The receiver is a bare node:http server in a worker thread: a real receiver
// is another machine, and it must not share Gantry's event loop here.
//
// GANTRY_BENCH_WEBHOOK_DELIVERIES sets N (a multiple of 100, default 5,000);
// GANTRY_WEBHOOK_CONCURRENCY, when set, is the server's (and the baseline's).
import { Worker } from 'node:worker_threads';
import { Agent, request } from 'undici';
import { HookTaskStatus } from '../../src/models/hook-tasks.ts';
import { createWorkDir, remoteUrl } from '../../test/support/workdir.ts';
import type { WorkDir } from '../../test/support/workdir.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { GantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';
import { createBenchOwner } from '../lib/bench-owner.ts';

const HOOKS = 100;
const DEFAULT_DELIVERIES = 5_000;
const BASELINE_WARMUP_REQUESTS = 500;
const PUSH_WARMUPS = 2;
const MIN_TIMED_PUSHES = 10;
const ARRIVAL_TIMEOUT_MS = 10 * 60_000;
const SETTLE_TIMEOUT_MS = 60_000;
// Held answers must outlive the time it takes to queue the backlog (50 pushes):
// a delivery that timed out would be retried later, outside the measurement.
const DELIVER_TIMEOUT_SEC = 300;

function queuedDeliveries(): number {
  const raw = process.env.GANTRY_BENCH_WEBHOOK_DELIVERIES?.trim();
  if (!raw) return DEFAULT_DELIVERIES;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < HOOKS || value % HOOKS !== 0) {
    throw new Error(`GANTRY_BENCH_WEBHOOK_DELIVERIES must be a positive multiple of ${HOOKS}, got "${raw}"`);
  }
  return value;
}

/** Wall-clock milliseconds with sub-millisecond precision, comparable across threads. */
function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

// The receiver thread (plain JavaScript, evaluated as CommonJS). It counts
// requests since the last reset, the distinct delivery ids among them and the
// last arrival; keeps the first request as a sample; and while the gate is
// closed keeps every answer back.
const RECEIVER_THREAD = `
const { parentPort } = require('node:worker_threads');
const http = require('node:http');
const now = () => performance.timeOrigin + performance.now();
let open = true;
let held = [];
let count = 0;
let last = 0;
let ids = new Set();
let sample = null;
let waits = [];
const answer = (res) => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' }).end('ok');
const stats = () => ({ count, distinct: ids.size, last, sample });
const check = () => {
  waits = waits.filter((w) => {
    if (count < w.count) return true;
    parentPort.postMessage({ kind: 'reached', id: w.id, stats: stats() });
    return false;
  });
};
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    count += 1;
    last = now();
    const id = req.headers['x-forgejo-delivery'];
    if (typeof id === 'string') ids.add(id);
    if (sample === null) sample = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
    if (open) answer(res);
    else held.push(res);
    check();
  });
});
server.keepAliveTimeout = 60000;
parentPort.on('message', (m) => {
  if (m.kind === 'gate') {
    open = m.open;
    if (open) for (const res of held.splice(0)) answer(res);
  } else if (m.kind === 'reset') {
    count = 0; last = 0; ids = new Set(); sample = null;
  } else if (m.kind === 'wait') {
    waits.push({ id: m.id, count: m.count });
    check();
  } else if (m.kind === 'stats') {
    parentPort.postMessage({ kind: 'stats', id: m.id, stats: stats() });
  } else if (m.kind === 'close') {
    for (const res of held.splice(0)) answer(res);
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ kind: 'ready', port: server.address().port }));
`;

interface ReceiverStats {
  count: number;
  distinct: number;
  /** nowMs() of the last arrival. */
  last: number;
  sample: { headers: Record<string, string | string[] | undefined>; body: string } | null;
}

type ReceiverMessage =
  { kind: 'ready'; port: number } | { kind: 'reached' | 'stats'; id: number; stats: ReceiverStats };

class ReceiverThread {
  private nextId = 0;
  private readonly pending = new Map<number, (stats: ReceiverStats) => void>();

  private constructor(
    private readonly worker: Worker,
    readonly url: string,
  ) {
    worker.on('message', (m: ReceiverMessage) => {
      if (m.kind === 'ready') return;
      this.pending.get(m.id)?.(m.stats);
      this.pending.delete(m.id);
    });
  }

  static async start(): Promise<ReceiverThread> {
    const worker = new Worker(RECEIVER_THREAD, { eval: true });
    const port = await new Promise<number>((resolve, reject) => {
      worker.once('error', reject);
      worker.once('message', (m: ReceiverMessage) =>
        m.kind === 'ready' ? resolve(m.port) : reject(new Error(`receiver: unexpected ${m.kind}`)),
      );
    });
    return new ReceiverThread(worker, `http://127.0.0.1:${port}`);
  }

  gate(open: boolean): void {
    this.worker.postMessage({ kind: 'gate', open });
  }

  reset(): void {
    this.worker.postMessage({ kind: 'reset' });
  }

  stats(): Promise<ReceiverStats> {
    return this.ask({ kind: 'stats' }, 10_000, 'stats');
  }

  /** Resolves once `count` requests arrived since the last reset. */
  waitFor(count: number, timeoutMs: number): Promise<ReceiverStats> {
    return this.ask({ kind: 'wait', count }, timeoutMs, `${count} requests`);
  }

  private ask(message: object, timeoutMs: number, what: string): Promise<ReceiverStats> {
    const id = this.nextId++;
    return new Promise<ReceiverStats>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        void this.stats().then(
          (s) => reject(new Error(`receiver: no ${what} within ${timeoutMs} ms (${s.count} received)`)),
          reject,
        );
      }, timeoutMs);
      this.pending.set(id, (stats) => {
        clearTimeout(timer);
        resolve(stats);
      });
      this.worker.postMessage({ ...message, id });
    });
  }

  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.postMessage({ kind: 'close' });
    await exited;
  }
}

interface Setup {
  gantry: GantryServer;
  receiver: ReceiverThread;
  /** The organization with HOOKS hooks, and the one with none. */
  hooked: WorkDir;
  quiet: WorkDir;
  concurrency: number;
}

async function api(gantry: GantryServer, token: string, method: string, path: string, body: unknown): Promise<unknown> {
  const response = await fetch(`${gantry.url}/api/v1${path}`, {
    method,
    headers: { authorization: `token ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : null;
}

async function setUp(ctx: ScenarioContext): Promise<Setup> {
  const receiver = await ReceiverThread.start();
  ctx.defer(() => receiver.close());
  const gantry = await startGantryServer({
    databaseUrl: await ctx.databaseUrl(),
    env: {
      GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback',
      GANTRY_WEBHOOK_DELIVER_TIMEOUT: String(DELIVER_TIMEOUT_SEC),
      ...(process.env.GANTRY_WEBHOOK_CONCURRENCY
        ? { GANTRY_WEBHOOK_CONCURRENCY: process.env.GANTRY_WEBHOOK_CONCURRENCY }
        : {}),
    },
  });
  ctx.defer(() => gantry.stop());
  // Runs first: a stopping Gantry waits for its deliveries in flight, which a closed gate would hold.
  ctx.defer(() => receiver.gate(true));
  const { accounts, accessTokens } = gantry.deps.services;
  const { owner, token } = await createBenchOwner({ accounts, accessTokens });

  const workDirs: WorkDir[] = [];
  for (const org of ['hooked', 'quiet']) {
    await api(gantry, token, 'POST', '/orgs', { username: org });
    await api(gantry, token, 'POST', `/orgs/${org}/repos`, { name: 'app' });
    const work = await createWorkDir(remoteUrl(gantry.url, org, 'app', { user: owner.name, password: token }));
    ctx.defer(() => work.remove());
    await work.commit({ 'README.md': `# ${org}/app\n` }, 'First commit');
    const pushed = await work.push('main');
    if (pushed.code !== 0) throw new Error(`git push to ${org}/app failed: ${pushed.stderr}`);
    workDirs.push(work);
  }
  ctx.log(`creating ${HOOKS} hooks on the organization "hooked"…`);
  for (let i = 0; i < HOOKS; i += 1) {
    await api(gantry, token, 'POST', '/orgs/hooked/hooks', {
      type: 'forgejo',
      config: { url: `${receiver.url}/hook/${i}`, content_type: 'json', secret: `bench-secret-${i}` },
      events: ['push'],
      active: true,
    });
  }
  const [hooked, quiet] = workDirs as [WorkDir, WorkDir];
  return { gantry, receiver, hooked, quiet, concurrency: gantry.deps.config.webhookConcurrency };
}

let commitCounter = 0;

/** Commits one change and returns the wall time of `git push` in milliseconds. */
async function timedPush(work: WorkDir): Promise<number> {
  commitCounter += 1;
  await work.commit({ 'counter.txt': `${commitCounter}\n` }, `Change ${commitCounter}`);
  const started = performance.now();
  const pushed = await work.push('main');
  const elapsed = performance.now() - started;
  if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);
  return elapsed;
}

async function pushLatencyMetrics(setup: Setup, ctx: ScenarioContext): Promise<Metric[]> {
  const { receiver, hooked, quiet } = setup;
  const timed = Math.max(MIN_TIMED_PUSHES, 2 * ctx.durationSec);
  const withHooks: number[] = [];
  const withoutHooks: number[] = [];
  receiver.reset();
  let expected = 0;
  ctx.log(
    `timing ${timed} pushes with ${HOOKS} matching hooks and ${timed} with none, alternating (+${PUSH_WARMUPS} warm-up each)…`,
  );
  for (let i = 0; i < PUSH_WARMUPS + timed; i += 1) {
    const without = await timedPush(quiet);
    const withMs = await timedPush(hooked);
    expected += HOOKS;
    // The next push starts on a quiet server: this one's deliveries have arrived.
    await receiver.waitFor(expected, ARRIVAL_TIMEOUT_MS);
    if (i >= PUSH_WARMUPS) {
      withoutHooks.push(without);
      withHooks.push(withMs);
    }
  }
  const p50With = percentile(withHooks, 50);
  const p50Without = percentile(withoutHooks, 50);
  const p90With = percentile(withHooks, 90);
  const p90Without = percentile(withoutHooks, 90);
  ctx.log(
    `git push p50 ${p50With.toFixed(1)} ms with ${HOOKS} hooks, ${p50Without.toFixed(1)} ms without; p90 ${p90With.toFixed(1)} / ${p90Without.toFixed(1)} ms`,
  );
  return [
    {
      metric: `git push p50 (ms), ${HOOKS} matching hooks vs none`,
      value: p50With,
      baseline: p50Without,
      ratio: p50With / p50Without,
      target: null,
      decimals: 1,
    },
    {
      metric: `git push p90 (ms), ${HOOKS} matching hooks vs none`,
      value: p90With,
      baseline: p90Without,
      ratio: p90With / p90Without,
      target: null,
      decimals: 1,
    },
    {
      metric: `git push p50: added by ${HOOKS} hooks (ms)`,
      value: p50With - p50Without,
      baseline: null,
      ratio: null,
      target: null,
      decimals: 1,
    },
  ];
}

async function countByStatus(gantry: GantryServer): Promise<Map<number, number>> {
  const { db } = gantry.deps.database;
  const rows = await db
    .selectFrom('hook_task')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  return new Map(rows.map((r) => [Number(r.status), Number(r.n)]));
}

/** Queues `deliveries` behind a closed gate, opens it, and times the backlog to its last arrival. */
async function gantryThroughput(
  setup: Setup,
  deliveries: number,
  ctx: ScenarioContext,
): Promise<{ rate: number; sample: NonNullable<ReceiverStats['sample']> }> {
  const { gantry, receiver, hooked, concurrency } = setup;
  // The push-latency deliveries have all arrived; wait until they are recorded too.
  const quietBy = Date.now() + SETTLE_TIMEOUT_MS;
  let before = await countByStatus(gantry);
  while ((before.get(HookTaskStatus.pending) ?? 0) + (before.get(HookTaskStatus.delivering) ?? 0) > 0) {
    if (Date.now() > quietBy)
      throw new Error(
        `deliveries not settled before the backlog is queued: ${JSON.stringify(Object.fromEntries(before))} (status → rows)`,
      );
    await sleep(50);
    before = await countByStatus(gantry);
  }
  const delivered = before.get(HookTaskStatus.delivered) ?? 0;

  receiver.reset();
  receiver.gate(false);
  const pushes = deliveries / HOOKS;
  ctx.log(
    `queueing ${deliveries.toLocaleString('en-US')} deliveries: ${pushes} pushes × ${HOOKS} hooks, the receiver holding its answers…`,
  );
  const pushMs: number[] = [];
  for (let i = 0; i < pushes; i += 1) pushMs.push(await timedPush(hooked));
  ctx.log(`queued; git push p50 ${percentile(pushMs, 50).toFixed(1)} ms while the backlog grew`);
  // The worker's slots are all taken by held requests: nothing else moves.
  const held = await receiver.waitFor(Math.min(concurrency, deliveries), 60_000);
  const queued = await countByStatus(gantry);
  const waiting = (queued.get(HookTaskStatus.pending) ?? 0) + (queued.get(HookTaskStatus.delivering) ?? 0);
  if (waiting !== deliveries) throw new Error(`${waiting} deliveries queued, expected ${deliveries}`);
  if (held.count > concurrency)
    throw new Error(`${held.count} requests arrived with the gate closed; the worker's concurrency is ${concurrency}`);

  ctx.log(
    `measuring: the receiver answers; ${deliveries.toLocaleString('en-US')} deliveries at concurrency ${concurrency}…`,
  );
  const started = nowMs();
  receiver.gate(true);
  const done = await receiver.waitFor(deliveries, ARRIVAL_TIMEOUT_MS);
  const rate = deliveries / ((done.last - started) / 1000);

  // A healthy receiver gets each delivery once, and every row ends delivered.
  const settleBy = Date.now() + SETTLE_TIMEOUT_MS;
  let after = await countByStatus(gantry);
  while ((after.get(HookTaskStatus.delivered) ?? 0) < delivered + deliveries) {
    if (Date.now() > settleBy)
      throw new Error(`deliveries not settled: ${JSON.stringify(Object.fromEntries(after))} (status → rows)`);
    await sleep(50);
    after = await countByStatus(gantry);
  }
  const final = await receiver.stats();
  if (final.count !== deliveries || final.distinct !== deliveries) {
    throw new Error(
      `the receiver got ${final.count} requests with ${final.distinct} distinct delivery ids, expected ${deliveries} once each`,
    );
  }
  if (!final.sample) throw new Error('the receiver kept no sample request');
  ctx.log(
    `Gantry: ${deliveries.toLocaleString('en-US')} deliveries in ${((done.last - started) / 1000).toFixed(2)} s: ${Math.round(rate)}/s`,
  );
  return { rate, sample: final.sample };
}

/** The same requests from a plain undici client at the same concurrency: the receiver's capacity. */
async function baselineThroughput(
  setup: Setup,
  sample: NonNullable<ReceiverStats['sample']>,
  deliveries: number,
  ctx: ScenarioContext,
): Promise<number> {
  const { receiver, concurrency } = setup;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(sample.headers)) {
    if (
      value === undefined ||
      ['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'].includes(name)
    )
      continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const agent = new Agent();
  ctx.defer(() => agent.close());
  const send = async (count: number, tag: string): Promise<void> => {
    let next = 0;
    const loop = async (): Promise<void> => {
      while (next < count) {
        const i = next++;
        const response = await request(`${receiver.url}/hook/${i % HOOKS}`, {
          method: 'POST',
          headers: { ...headers, 'x-forgejo-delivery': `${tag}-${i}` },
          body: sample.body,
          dispatcher: agent,
        });
        await response.body.text();
        if (response.statusCode !== 200) throw new Error(`the receiver answered ${response.statusCode}`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
  };
  receiver.reset();
  await send(BASELINE_WARMUP_REQUESTS, 'warmup');
  receiver.reset();
  ctx.log(
    `measuring the baseline: ${deliveries.toLocaleString('en-US')} POSTs of the same delivery from undici at concurrency ${concurrency}…`,
  );
  const started = nowMs();
  await send(deliveries, 'baseline');
  const done = await receiver.waitFor(deliveries, ARRIVAL_TIMEOUT_MS);
  const rate = deliveries / ((done.last - started) / 1000);
  ctx.log(`baseline: ${Math.round(rate)}/s`);
  return rate;
}

export const webhooks: Scenario = {
  name: 'webhooks',
  description:
    `webhook deliveries/s out of a backlog of ${(Number(process.env.GANTRY_BENCH_WEBHOOK_DELIVERIES?.trim()) || DEFAULT_DELIVERIES).toLocaleString('en-US')} ` +
    `(vs a plain undici client); git push latency with ${HOOKS} matching hooks vs none`,
  async run(ctx) {
    const deliveries = queuedDeliveries();
    const setup = await setUp(ctx);
    const push = await pushLatencyMetrics(setup, ctx);
    const gantry = await gantryThroughput(setup, deliveries, ctx);
    const baseline = await baselineThroughput(setup, gantry.sample, deliveries, ctx);
    return [
      {
        metric: `deliveries/s, ${deliveries} queued, concurrency ${setup.concurrency} (vs undici client)`,
        value: gantry.rate,
        baseline,
        ratio: gantry.rate / baseline,
        target: { of: 'value', kind: 'atLeast', threshold: 1000 },
        decimals: 0,
      },
      ...push,
    ];
  },
};
