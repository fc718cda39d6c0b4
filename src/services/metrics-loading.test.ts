// prom-client is loaded when a server's metrics are made (GANTRY_METRICS_TOKEN
// set), not with the module: a server without metrics does not keep it.
// Checked in a child process, since this one may have it loaded.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const CHILD = `
import { createRequire } from 'node:module';
const { createMetricsService } = await import('./src/services/metrics.ts');
const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/node_modules/prom-client/'));
const before = loaded();
const metrics = await createMetricsService({}, { nowMs: () => 0, nowSec: () => 0 });
metrics.observeRequest('GET', '/x', 200, 0.01);
console.log(JSON.stringify({ before, after: loaded(), counted: (await metrics.render()).includes('gantry_http_requests_total{method="GET",route="/x",status="200"} 1') }));
`;

test('prom-client is loaded when the metrics are made, not with the module', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', CHILD],
    { cwd: ROOT },
  );
  assert.deepEqual(JSON.parse(stdout.trim().split('\n').at(-1) ?? ''), { before: false, after: true, counted: true });
});
