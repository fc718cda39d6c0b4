import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from './config.ts';

test('defaults need no configuration', () => {
  const config = loadConfig({}, '/srv/gantry');
  assert.equal(config.dataDir, '/srv/gantry/data');
  assert.equal(config.httpPort, 3000);
  assert.equal(config.rootUrl, 'http://localhost:3000/');
  assert.equal(config.databaseUrl, null);
  assert.equal(config.webhookAllowedHosts, 'external');
  assert.ok(Object.isFrozen(config));
});

test('invalid values fail naming the key', () => {
  const cases: Record<string, string>[] = [
    { GANTRY_HTTP_PORT: 'eighty' },
    { GANTRY_HTTP_PORT: '70000' },
    { GANTRY_ROOT_URL: 'ftp://x/' },
    { GANTRY_DATABASE_URL: 'mysql://x' },
    { GANTRY_SECRET_KEY: 'short' },
    { GANTRY_LOG_LEVEL: 'loud' },
  ];
  for (const env of cases) {
    const key = Object.keys(env)[0] as string;
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && e.key === key && e.message.includes(key),
    );
  }
});

test('root URL gains a trailing slash and follows the port', () => {
  assert.equal(
    loadConfig({ GANTRY_ROOT_URL: 'https://ci.example.com/gantry' }).rootUrl,
    'https://ci.example.com/gantry/',
  );
  assert.equal(loadConfig({ GANTRY_HTTP_PORT: '8080' }).rootUrl, 'http://localhost:8080/');
});

test('GANTRY_SECRET_KEY_PREVIOUS: comma-separated keys of 32+ characters', () => {
  assert.deepEqual(loadConfig({}).secretKeyPrevious, []);
  const a = 'a'.repeat(32);
  const b = 'b'.repeat(44);
  assert.deepEqual(loadConfig({ GANTRY_SECRET_KEY_PREVIOUS: ` ${a} ,${b},` }).secretKeyPrevious, [a, b]);
  assert.throws(
    () => loadConfig({ GANTRY_SECRET_KEY_PREVIOUS: `${a},short` }),
    (e: unknown) => e instanceof ConfigError && e.key === 'GANTRY_SECRET_KEY_PREVIOUS',
  );
});

test('webhook delivery timeout (seconds) and attempts: defaults, parsing, bounds', () => {
  const defaults = loadConfig({});
  assert.deepEqual([defaults.webhookDeliverTimeoutMs, defaults.webhookMaxAttempts], [5000, 8]);
  const set = loadConfig({ GANTRY_WEBHOOK_DELIVER_TIMEOUT: '12', GANTRY_WEBHOOK_MAX_ATTEMPTS: '1' });
  assert.deepEqual([set.webhookDeliverTimeoutMs, set.webhookMaxAttempts], [12_000, 1]);
  for (const [key, value] of [
    ['GANTRY_WEBHOOK_DELIVER_TIMEOUT', '0'],
    ['GANTRY_WEBHOOK_MAX_ATTEMPTS', '21'],
    ['GANTRY_WEBHOOK_MAX_ATTEMPTS', 'many'],
  ] as const) {
    assert.throws(
      () => loadConfig({ [key]: value }),
      (e: unknown) => e instanceof ConfigError && e.key === key,
    );
  }
});

test('run size caps: 1 MiB workflow files, 256 jobs and 16 MiB of job payloads per run by default; bounded', () => {
  const defaults = loadConfig({});
  assert.deepEqual(
    [defaults.actionsMaxWorkflowBytes, defaults.actionsMaxJobsPerRun, defaults.actionsMaxRunPayloadBytes],
    [1024 ** 2, 256, 16 * 1024 ** 2],
  );
  const set = loadConfig({
    GANTRY_ACTIONS_MAX_WORKFLOW_SIZE: '4096',
    GANTRY_ACTIONS_MAX_JOBS_PER_RUN: '1',
    GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE: '65536',
  });
  assert.deepEqual(
    [set.actionsMaxWorkflowBytes, set.actionsMaxJobsPerRun, set.actionsMaxRunPayloadBytes],
    [4096, 1, 65536],
  );
  for (const [key, value] of [
    ['GANTRY_ACTIONS_MAX_WORKFLOW_SIZE', '10'],
    ['GANTRY_ACTIONS_MAX_JOBS_PER_RUN', '0'],
    // A run is planned and written in one transaction: even a raised cap stays bounded.
    ['GANTRY_ACTIONS_MAX_JOBS_PER_RUN', '10001'],
    ['GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE', 'unlimited'],
  ] as const) {
    assert.throws(
      () => loadConfig({ [key]: value }),
      (e: unknown) => e instanceof ConfigError && e.key === key,
    );
  }
});
