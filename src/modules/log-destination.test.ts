import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const DESTINATION = fileURLToPath(new URL('./log-destination.ts', import.meta.url));

/** Runs `body` in a fresh process whose `logger` writes through stdoutBatched; its stdout and status. */
function runLogging(body: string): { lines: string[]; status: number | null } {
  const script = [
    `import pino from 'pino';`,
    `import { stdoutBatched } from ${JSON.stringify(DESTINATION)};`,
    `const logger = pino({ base: null, timestamp: false }, stdoutBatched());`,
    body,
  ].join('\n');
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
    encoding: 'utf8',
  });
  const lines = result.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { msg: string }).msg);
  return { lines, status: result.status };
}

test('lines of one turn and of later turns come out whole and in order', () => {
  const { lines, status } = runLogging(`
    for (let i = 0; i < 500; i++) logger.info('first turn ' + i + ' ' + 'x'.repeat(200));
    setImmediate(() => logger.info('second turn'));
    setTimeout(() => logger.info('later'), 20);
  `);
  assert.equal(status, 0);
  assert.deepEqual(lines, [
    ...Array.from({ length: 500 }, (_, i) => `first turn ${i} ${'x'.repeat(200)}`),
    'second turn',
    'later',
  ]);
});

test('lines with characters beyond ASCII come out as logged, in batches and at exit', () => {
  const { lines, status } = runLogging(`
    for (let i = 0; i < 300; i++) logger.info('déjà vu ' + i + ' 日本 😀 ' + 'é'.repeat(100));
    setTimeout(() => {
      logger.info('fin: ünïcödé');
      process.exit(0);
    }, 30);
  `);
  assert.equal(status, 0);
  assert.deepEqual(lines, [
    ...Array.from({ length: 300 }, (_, i) => `déjà vu ${i} 日本 😀 ${'é'.repeat(100)}`),
    'fin: ünïcödé',
  ]);
});

test('the lines logged just before process.exit and before an uncaught exception are written', () => {
  const exited = runLogging(`
    setTimeout(() => {
      logger.info('before exit');
      process.exit(3);
    }, 5);
  `);
  assert.equal(exited.status, 3);
  assert.deepEqual(exited.lines, ['before exit']);

  const crashed = runLogging(`
    setTimeout(() => {
      logger.info('before the crash');
      throw new Error('boom');
    }, 5);
  `);
  assert.equal(crashed.status, 1);
  assert.deepEqual(crashed.lines, ['before the crash']);
});

test('the loggers of one process share one destination: lines of both, in order, no exit listener per logger', () => {
  const { lines, status } = runLogging(`
    const second = pino({ base: null, timestamp: false }, stdoutBatched());
    const before = process.listenerCount('exit');
    for (let i = 0; i < 20; i++) pino({}, stdoutBatched());
    logger.info('first logger');
    second.info('second logger');
    logger.info('exit listeners added: ' + (process.listenerCount('exit') - before));
  `);
  assert.equal(status, 0);
  assert.deepEqual(lines, ['first logger', 'second logger', 'exit listeners added: 0']);
});

test('a line reaches standard output while the process runs on, without waiting for its exit', () => {
  // The line is logged, then 100 ms later (ten times the batch's delay) a marker goes
  // straight to fd 1: the line must already be out, ahead of it.
  const { lines, status } = runLogging(`
    import fs from 'node:fs';
    logger.info('logged');
    setTimeout(() => {
      fs.writeSync(1, JSON.stringify({ msg: 'marker' }) + '\\n');
      setTimeout(() => {}, 50);
    }, 100);
  `);
  assert.equal(status, 0);
  assert.deepEqual(lines, ['logged', 'marker']);
});
