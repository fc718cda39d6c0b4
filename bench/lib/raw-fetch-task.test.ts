import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { serveBare } from './bare-fetch-task.ts';
import { serveRaw } from './raw-fetch-task.ts';

/** A FetchTask as the bench's runners send it: a 2-byte body and the call's deadline. */
function fetchRequest(timeoutMs: number): string {
  return (
    'POST /api/actions/runner.v1.RunnerService/FetchTask HTTP/1.1\r\n' +
    'Host: 127.0.0.1\r\n' +
    'Content-Type: application/proto\r\n' +
    `Connect-Timeout-Ms: ${timeoutMs}\r\n` +
    'Content-Length: 2\r\n\r\n' +
    '\x08\x00'
  );
}

/** Sends `requests` at once on one connection; resolves with everything read once `answers` answers arrived, and when. */
function exchange(port: number, requests: string, answers: number): Promise<{ text: string; ms: number[] }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect(port, '127.0.0.1', () => socket.write(requests, 'latin1'));
    let text = '';
    const ms: number[] = [];
    socket.on('data', (bytes: Buffer) => {
      text += bytes.toString('latin1');
      while (text.split('HTTP/1.1 ').length - 1 > ms.length) ms.push(performance.now() - started);
      if (ms.length === answers && text.endsWith('\x10\x01')) {
        socket.destroy();
        resolve({ text, ms });
      }
    });
    socket.on('error', reject);
  });
}

/** An answer's head without the headers that differ per answer (request id, date), names lower-cased. */
function stableHead(answer: string): string[] {
  const head = answer.slice(0, answer.indexOf('\r\n\r\n')).split('\r\n');
  return head
    .map((line) => line.replace(/^[^:]+:/, (name) => name.toLowerCase()))
    .filter((line) => !/^(x-request-id|date):/.test(line));
}

describe('the idle fleet floors (bench)', () => {
  const raw = serveRaw();
  const bare = serveBare();
  before(async () => {
    await new Promise<void>((resolve) => raw.server.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  });
  after(() => {
    raw.closeAll();
    raw.server.close();
    bare.closeAllConnections();
    bare.close();
  });
  const portOf = (server: net.Server): number => (server.address() as AddressInfo).port;

  it('the raw server holds a poll as Gantry would (the deadline less 500 ms) and answers what node:http answers', async () => {
    const fromRaw = await exchange(portOf(raw.server), fetchRequest(800), 1);
    const fromBare = await exchange(portOf(bare), fetchRequest(800), 1);
    assert.ok((fromRaw.ms[0] as number) >= 290, `answered after ${fromRaw.ms[0]} ms, held for 300`);
    assert.deepEqual(stableHead(fromRaw.text), stableHead(fromBare.text));
    assert.ok(fromRaw.text.endsWith('\r\n\r\n\x10\x01'));
    assert.match(fromRaw.text, /\r\nx-request-id: [0-9a-f-]{36}\r\n/);
  });

  it('the raw server answers a connection’s polls one after the other, each held in turn', async () => {
    const { text, ms } = await exchange(portOf(raw.server), fetchRequest(700) + fetchRequest(700), 2);
    assert.equal(text.split('HTTP/1.1 200 OK').length - 1, 2);
    assert.ok((ms[1] as number) >= 390, `the second answer came ${ms[1]} ms after both were sent, before two holds`);
  });
});
