// fast-check arbitraries for whole HTTP requests against one route: path
// segments, query string, credentials, headers and body, either plausible
// (real names, a body of the right shape, a signed-in client: they reach the
// handlers) or hostile in every part.
import fc from 'fast-check';
import type { Arbitrary } from 'fast-check';
import { gitBody, apiBody, plausibleBody, rpcBody } from './bodies.ts';
import type { FuzzRoute } from './routes.ts';
import { HTTP_METHODS } from './routes.ts';
import { HEX40, NUMBERS_AS_TEXT, pct, segmentText } from './values.ts';
import type { FuzzRequest, FuzzWorld } from './world.ts';

/** The fixture's values for a parameter: the disposable ones when the request may destroy its target. */
function destroys(name: string, route: FuzzRoute, method: string): boolean {
  return (method === 'DELETE' || method === 'PATCH') && name === route.params[route.params.length - 1];
}

function validValues(name: string, world: FuzzWorld, route: FuzzRoute, method: string): string[] {
  const valid = destroys(name, route, method) ? (world.disposable[name] ?? []) : (world.pools[name] ?? []);
  return route.kind === 'git' && name === 'repo' ? valid.flatMap((r) => [`${r}.git`, r]) : valid;
}

function hostileSegment(name: string): Arbitrary<string> {
  // Token ids are never guessed: a DELETE must not revoke the tokens the fuzzer signs in with.
  return name === 'token' ? segmentText.filter((s) => !/^(\+|%2B)?\d+$/.test(s)) : segmentText;
}

/** Real values for every parameter; `owner` and `repo` as a pair that exists. */
function realSegments(world: FuzzWorld, route: FuzzRoute, method: string): Arbitrary<string[]> {
  const each = route.params.map((name) => {
    const values = validValues(name, world, route, method);
    return values.length > 0 ? fc.constantFrom(...values.map(pct)) : hostileSegment(name);
  });
  const owner = route.params.indexOf('owner');
  const repo = route.params.indexOf('repo');
  if (owner < 0 || repo < 0) return fc.tuple(...each);
  const pairs = destroys('repo', route, method) ? world.repos.disposable : world.repos.existing;
  const suffix = route.kind === 'git' ? fc.constantFrom('.git', '') : fc.constant('');
  return fc.tuple(fc.tuple(...each), fc.constantFrom(...pairs), suffix).map(([values, [o, r], end]) => {
    const out = [...values];
    out[owner] = pct(o);
    out[repo] = `${pct(r)}${end}`;
    return out;
  });
}

/**
 * The route's parameters: all real values in half the requests (so they
 * reach the handlers), otherwise each one real or hostile at random.
 */
function segmentsFor(world: FuzzWorld, route: FuzzRoute, method: string): Arbitrary<string[]> {
  const hostile = route.params.map(hostileSegment);
  return fc
    .tuple(
      realSegments(world, route, method),
      fc.tuple(...hostile),
      fc.boolean(),
      fc.array(fc.boolean(), { minLength: route.params.length, maxLength: route.params.length }),
    )
    .map(([good, bad, allValid, pickBad]) =>
      good.map((g, i) => (!allValid && pickBad[i] === true ? (bad[i] as string) : g)),
    );
}

const QUERY_KEYS = [
  'page',
  'limit',
  'status',
  'event',
  'labels',
  'visible',
  'run_number',
  'head_sha',
  'ref',
  'workflow_id',
  'return_run_details',
  'service',
  'sudo',
  'token',
  'access_token',
  'page[]',
  'limit[0]',
  'page[a]',
  'status[]',
  '__proto__',
  'constructor',
  '',
];

function queryValues(world: FuzzWorld): Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...NUMBERS_AS_TEXT.map(pct)) },
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        'true',
        'false',
        'on',
        'success',
        'failure',
        'waiting',
        'running',
        'cancelled',
        'skipped',
        'blocked',
        'unknown',
        'bogus',
        'push',
        'workflow_dispatch',
        'git-upload-pack',
        'git-receive-pack',
        'git-upload-archive',
        'alice',
        'root',
        'acme',
        'nobody',
        'main',
        'refs/heads/main',
        'ci.yml',
        world.values.sha,
        ...world.values.labels,
        'a,b,,c',
        '%00',
        '%',
        '%zz',
        pct('🚀'),
        'x'.repeat(3000),
      ),
    },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map(pct) },
  );
}

function queryFor(route: FuzzRoute, world: FuzzWorld): Arbitrary<string> {
  const key = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...route.query, ...QUERY_KEYS) },
    { weight: 1, arbitrary: fc.string({ maxLength: 10 }).map(pct) },
  );
  const pair = fc.oneof(
    { weight: 8, arbitrary: fc.tuple(key, queryValues(world)).map(([k, v]) => `${k}=${v}`) },
    { weight: 1, arbitrary: key },
    { weight: 1, arbitrary: fc.constantFrom('=', '&', '==', 'a=b=c', '%26=%3D', ';', '?') },
  );
  return fc.array(pair, { maxLength: 8 }).map((pairs) => (pairs.length === 0 ? '' : `?${pairs.join('&')}`));
}

/** A query a well-behaved client might send. */
function plausibleQuery(route: FuzzRoute, world: FuzzWorld): Arbitrary<string> {
  if (route.kind === 'git') return fc.constantFrom('?service=git-upload-pack', '?service=git-receive-pack');
  const pair = fc.oneof(
    fc.integer({ min: 1, max: 3 }).map((n) => `page=${n}`),
    fc.integer({ min: 1, max: 60 }).map((n) => `limit=${n}`),
    fc.constantFrom(
      'status=success',
      'status=waiting',
      'status=running',
      'event=push',
      'event=workflow_dispatch',
      'visible=true',
      `head_sha=${world.values.sha}`,
      'ref=refs/heads/main',
      'workflow_id=ci.yml',
      'run_number=1',
      'labels=fuzz',
    ),
  );
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant('') },
    { weight: 1, arbitrary: fc.array(pair, { minLength: 1, maxLength: 3 }).map((pairs) => `?${pairs.join('&')}`) },
  );
}

type Auth = { label: string; headers: Record<string, string | string[]> };

/** A signed-in client: the admin or the user with a token, or the runner on the runner protocol. */
function plausibleAuth(world: FuzzWorld, route: FuzzRoute): Arbitrary<Auth> {
  if (route.kind === 'rpc') {
    // A deadline, as runners send: a fetch then answers at once instead of holding the batch for its long poll.
    const headers = {
      'x-runner-uuid': world.runner.uuid,
      'x-runner-token': world.runner.token,
      'connect-protocol-version': '1',
      'connect-timeout-ms': '1000',
    };
    return fc.constant<Auth>({ label: 'runner', headers });
  }
  return fc.oneof(
    {
      weight: 3,
      arbitrary: fc.constant<Auth>({
        label: 'admin',
        headers: { authorization: `token ${world.identities.admin.token}` },
      }),
    },
    {
      weight: 3,
      arbitrary: fc.constant<Auth>({
        label: 'user',
        headers: { authorization: `token ${world.identities.user.token}` },
      }),
    },
    // Passwords cost a hash each: rarer. Token routes need them (Forgejo's reqBasicAuth).
    {
      weight: 1,
      arbitrary: fc.constant<Auth>({
        label: 'user',
        headers: { authorization: basic(world.identities.user.name, world.identities.user.password) },
      }),
    },
  );
}

function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

function authArbitrary(world: FuzzWorld, route: FuzzRoute): Arbitrary<Auth> {
  const as = (who: 'admin' | 'user'): Arbitrary<Auth> => {
    const id = world.identities[who];
    return fc
      .constantFrom(
        `token ${id.token}`,
        `Bearer ${id.token}`,
        `token ${id.token}`,
        basic(id.name, id.password),
        basic(id.name, id.token),
        basic(id.token, 'x-oauth-basic'),
        `TOKEN ${id.token}`,
        `token  ${id.token} `,
      )
      .map((value) => ({ label: who, headers: { authorization: value } }));
  };
  const garbage: Arbitrary<Auth> = fc
    .oneof(
      fc
        .tuple(
          fc.constantFrom('token', 'Bearer', 'Basic', 'Digest', 'Negotiate', 'bearer', '', 'token token'),
          fc.string({ maxLength: 60 }),
        )
        .map(([scheme, v]) => `${scheme} ${v}`),
      fc.constantFrom(
        'Basic',
        'Basic ',
        'Basic !!!',
        `Basic ${Buffer.from('nocolon').toString('base64')}`,
        `Basic ${Buffer.from(':').toString('base64')}`,
        'token',
        'Bearer ',
        'token ' + 'f'.repeat(40),
        'Basic ' + 'A'.repeat(12_000),
      ),
      HEX40.map((t) => `token ${t}`),
    )
    .map((value) => ({ label: 'garbage', headers: { authorization: value } }));
  const runner: Arbitrary<Auth> = fc
    .oneof(
      { weight: 4, arbitrary: fc.constant([world.runner.uuid, world.runner.token] as const) },
      {
        weight: 1,
        arbitrary: fc.tuple(
          fc.constantFrom(
            world.runner.uuid,
            world.values.runnerUuid,
            '',
            'not-a-uuid',
            '00000000-0000-0000-0000-000000000000',
          ),
          fc.constantFrom(world.runner.token, '', 'x'.repeat(64), 'garbage'),
        ),
      },
    )
    .map(([uuid, token]) => ({ label: 'runner', headers: { 'x-runner-uuid': uuid, 'x-runner-token': token } }));
  const duplicate: Arbitrary<Auth> = fc.tuple(as('user'), as('admin')).map(([a, b]) => ({
    label: 'duplicate',
    headers: { authorization: [String(a.headers.authorization), String(b.headers.authorization)] },
  }));
  return fc.oneof(
    { weight: route.kind === 'rpc' ? 1 : 5, arbitrary: as('admin') },
    { weight: route.kind === 'rpc' ? 1 : 5, arbitrary: as('user') },
    { weight: 3, arbitrary: fc.constant<Auth>({ label: 'anonymous', headers: {} }) },
    { weight: 1, arbitrary: garbage },
    { weight: route.kind === 'rpc' ? 8 : 1, arbitrary: runner },
    { weight: 1, arbitrary: duplicate },
  );
}

/** `arb` in about one request out of `outOf`, else nothing. */
function sometimes<T>(arb: Arbitrary<T>, outOf: number): Arbitrary<T | undefined> {
  return fc.oneof({ weight: outOf - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });
}

/** Headers besides credentials and the body's: sudo, request ids, encodings, protocol versions, padding. */
function extraHeaders(route: FuzzRoute): Arbitrary<Record<string, string>> {
  const printable = fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));
  const rpc = route.kind === 'rpc';
  return fc
    .record({
      sudo: sometimes(fc.oneof(fc.constantFrom('alice', 'root', 'acme', 'nobody', '', ' '), printable), 12),
      'x-request-id': sometimes(fc.oneof(printable, fc.constant('r'.repeat(9000))), 8),
      'accept-encoding': sometimes(fc.constantFrom('gzip', 'br', 'deflate', '*', 'identity;q=0', 'bogus'), 6),
      'git-protocol': sometimes(
        fc.constantFrom('version=2', 'version=1', 'version=999', 'version=2:object-format=sha256', 'x'.repeat(300)),
        route.kind === 'git' ? 2 : 10,
      ),
      'connect-protocol-version': rpc
        ? fc.oneof({ weight: 8, arbitrary: fc.constant('1') }, { weight: 1, arbitrary: fc.constantFrom('2', 'x', '') })
        : sometimes(fc.constant('1'), 10),
      // Mostly set on the runner protocol: without a deadline a fetch holds its batch for the whole long poll.
      'connect-timeout-ms': rpc
        ? fc.oneof(
            {
              weight: 4,
              arbitrary: fc.constantFrom('100', '1000', '1500', '0', '-1', 'abc', '99999999999999999999', '1e3'),
            },
            { weight: 1, arbitrary: fc.constant(undefined) },
          )
        : sometimes(fc.constantFrom('100', '1500'), 10),
      // A small set of keys, so that concurrent fetches in one batch share one now and then.
      'x-runner-request-key': sometimes(
        fc.oneof(fc.constantFrom('fuzz-key-1', 'fuzz-key-2'), printable, fc.constant('k'.repeat(100))),
        rpc ? 3 : 10,
      ),
      accept: sometimes(fc.constantFrom('application/json', '*/*', 'text/html', 'application/proto', ''), 8),
      'x-fuzz-padding': sometimes(
        fc.constantFrom(4_000, 14_000, 16_000, 16_300, 17_000, 40_000).map((n) => 'p'.repeat(n)),
        15,
      ),
    })
    .map((headers) =>
      Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string] => entry[1] !== undefined)),
    );
}

/**
 * One request against `route`: half of them plausible (real names, a
 * body of the right shape, a signed-in client), so they reach the handlers;
 * half hostile in every part. Mostly the route's own method, sometimes
 * another. A batch of these runs concurrently.
 */
export function requestArbitrary(route: FuzzRoute, world: FuzzWorld): Arbitrary<FuzzRequest> {
  const hostile = {
    query: queryFor(route, world),
    auth: authArbitrary(world, route),
    extra: extraHeaders(route),
    body:
      route.kind === 'rpc'
        ? rpcBody(route, world)
        : route.kind === 'git'
          ? gitBody(route, world)
          : apiBody(route, world),
  };
  const plausible = {
    query: plausibleQuery(route, world),
    auth: plausibleAuth(world, route),
    extra: fc.constant<Record<string, string>>({}),
    body: plausibleBody(route, world),
  };
  const build = (m: string, parts: typeof hostile, segments: Arbitrary<string[]>): Arbitrary<FuzzRequest> =>
    fc
      .tuple(segments, parts.query, parts.auth, parts.extra, parts.body)
      .map(([values, q, a, headersExtra, b]): FuzzRequest => {
        let i = 0;
        const path = route.template.replace(/:(\w+)|\*/g, () => values[i++] ?? '');
        const headers: Record<string, string | string[]> = { ...headersExtra, ...a.headers };
        if (b.contentType !== null) headers['content-type'] = b.contentType;
        if (b.encoding !== undefined) headers['content-encoding'] = b.encoding;
        const sendsBody = m !== 'GET' && m !== 'HEAD' && b.body !== null;
        return {
          method: m,
          path: `${path}${q}`,
          headers,
          body: sendsBody ? b.body : null,
          route: `${route.method} ${route.template}`,
          auth: a.label,
        };
      });
  const forMethod = (m: string): Arbitrary<FuzzRequest> =>
    fc.oneof(build(m, plausible, realSegments(world, route, m)), build(m, hostile, segmentsFor(world, route, m)));
  // Built once per method, not per request: building arbitraries costs more than drawing from them.
  const cache = new Map<string, Arbitrary<FuzzRequest>>();
  const byMethod = (m: string): Arbitrary<FuzzRequest> => {
    let arb = cache.get(m);
    if (arb === undefined) {
      arb = forMethod(m);
      cache.set(m, arb);
    }
    return arb;
  };
  const other = fc.constantFrom(...HTTP_METHODS.filter((m) => m !== route.method)).chain(byMethod);
  return fc.oneof({ weight: 6, arbitrary: byMethod(route.method) }, { weight: 1, arbitrary: other });
}
