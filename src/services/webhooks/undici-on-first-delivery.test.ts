// undici is loaded on the first delivery, not when the worker is made: a
// process sending no webhooks (a server mostly serving runners) does not keep
// its ~4.6 MB of heap. Checked in a child process, since this one has it loaded.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const CHILD = `
import { createRequire } from 'node:module';
const { WebhookDeliveryWorker } = await import('./src/services/webhooks/delivery-worker.ts');
const { createGuardedAgent } = await import('./src/services/webhooks/ssrf.ts');
const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/node_modules/undici/'));
new WebhookDeliveryWorker({}, { nowMs: () => 0, nowSec: () => 0 }, { open: () => '' });
const before = loaded();
const agent = await createGuardedAgent('external');
console.log(JSON.stringify({ before, after: loaded() }));
await agent.close();
`;

test('a delivery worker that has sent nothing has not loaded undici; its first agent loads it', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', CHILD],
    { cwd: ROOT },
  );
  assert.deepEqual(JSON.parse(stdout.trim()), { before: false, after: true });
});
