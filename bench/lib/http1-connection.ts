// One kept-alive HTTP/1.1 client connection over node:net, for the bench's
// runner clients (runner-wire.ts). forgejo-runner runs on other machines;
// here a hundred runners share the bench machine's 2 cores with the server
// they measure, so every microsecond they spend is taken from the server.
// node:http's client costs about 0.25 ms of CPU per call on this machine
// (its ClientRequest and IncomingMessage streams, the agent's pool, header
// objects); what a runner needs from a call is much less: its request
// written as one buffer, and of the answer the status, the body and whether
// the connection stays open.
//
// Contract:
//   - One call at a time per connection (`call` throws if one is in flight);
//     a runner with a call in flight opens another connection for the next
//     (runner-wire.ts keeps them in a pool, as Go's http.Transport does).
//   - A request is sent as given: the caller writes the request line and
//     every header (this file adds none), and the body's Content-Length.
//   - An answer is framed by Content-Length or chunked Transfer-Encoding
//     (RFC 9112 §6.3); one with neither is read until the server closes the
//     connection. 1xx answers are skipped. Anything else malformed ends the
//     connection and the call's outcome is 'dropped'.
//   - After an answer the connection stays open for the next call unless
//     the server said `Connection: close`; a connection closed or broken
//     while idle is simply not used again (`usable`).
//   - 'timeout': the call's deadline passed with no complete answer; the
//     connection is destroyed (as connect-go cancels a call). 'dropped': the
//     connection closed, failed or was aborted before a complete answer.
import net from 'node:net';

export interface Http1Answer {
  status: number;
  /** Header names lower-cased; a repeated header keeps its last value (the runner reads none that repeat). */
  headers: ReadonlyMap<string, string>;
  /** The body as sent (not decoded: the caller sees Content-Encoding in `headers`). */
  body: Buffer;
}

export type Http1Outcome = Http1Answer | 'timeout' | 'dropped';

export interface Http1CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

const HEAD_END = Buffer.from('\r\n\r\n');
/** An answer's head larger than this is malformed for this client (node:http's limit is 16 KiB). */
const MAX_HEAD = 64 * 1024;

/** The parse of one answer, fed the connection's bytes as they arrive. */
class AnswerReader {
  private pending: Buffer = Buffer.alloc(0);
  private status = 0;
  private headers = new Map<string, string>();
  /** null while the head is being read; then how the body is framed. */
  private framing: null | { kind: 'length'; remaining: number } | { kind: 'chunked' } | { kind: 'close' } = null;
  private bodyParts: Buffer[] = [];
  /** In a chunked body: the bytes left of the current chunk, or -1 while reading a chunk-size line. */
  private chunkLeft = -1;
  private inTrailers = false;

  /** Feeds bytes; returns the answer when complete, else null. Throws on a malformed answer. */
  feed(bytes: Buffer): Http1Answer | null {
    this.pending = this.pending.length === 0 ? bytes : Buffer.concat([this.pending, bytes]);
    for (;;) {
      if (this.framing === null) {
        const end = this.pending.indexOf(HEAD_END);
        if (end < 0) {
          if (this.pending.length > MAX_HEAD) throw new Error('answer head too large');
          return null;
        }
        const head = this.pending.toString('latin1', 0, end);
        this.pending = this.pending.subarray(end + HEAD_END.length);
        if (!this.readHead(head)) continue; // a 1xx answer: the real one follows
      }
      const framing = this.framing as NonNullable<typeof this.framing>;
      if (framing.kind === 'close') {
        if (this.pending.length > 0) this.bodyParts.push(this.pending);
        this.pending = Buffer.alloc(0);
        return null; // complete only at the connection's end (finishAtClose)
      }
      if (framing.kind === 'length') {
        const take = Math.min(framing.remaining, this.pending.length);
        if (take > 0) this.bodyParts.push(this.pending.subarray(0, take));
        this.pending = this.pending.subarray(take);
        framing.remaining -= take;
        if (framing.remaining > 0) return null;
        if (this.pending.length > 0) throw new Error('bytes after the answer');
        return this.answer();
      }
      const done = this.readChunks();
      if (!done) return null;
      if (this.pending.length > 0) throw new Error('bytes after the answer');
      return this.answer();
    }
  }

  /** The answer of a body framed by the connection's end, when it ends. */
  finishAtClose(): Http1Answer | null {
    return this.framing?.kind === 'close' ? this.answer() : null;
  }

  /** Parses a head; false for a 1xx answer (skipped). */
  private readHead(head: string): boolean {
    const lines = head.split('\r\n');
    const statusLine = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? '');
    if (statusLine === null)
      throw new Error(`not an HTTP/1.1 answer: ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`);
    const status = Number(statusLine[1]);
    if (status >= 100 && status < 200) return false;
    this.status = status;
    for (let i = 1; i < lines.length; i += 1) {
      const line = lines[i] as string;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new Error(`malformed header line ${JSON.stringify(line.slice(0, 80))}`);
      this.headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    const transferEncoding = this.headers.get('transfer-encoding');
    const contentLength = this.headers.get('content-length');
    if (transferEncoding !== undefined) {
      if (transferEncoding.toLowerCase() !== 'chunked') throw new Error(`transfer-encoding ${transferEncoding}`);
      this.framing = { kind: 'chunked' };
    } else if (contentLength !== undefined) {
      if (!/^\d+$/.test(contentLength)) throw new Error(`content-length ${contentLength}`);
      this.framing = { kind: 'length', remaining: Number(contentLength) };
    } else if (status === 204 || status === 304) this.framing = { kind: 'length', remaining: 0 };
    else this.framing = { kind: 'close' };
    return true;
  }

  /** Reads chunks from `pending`; true once the last chunk and the trailers are read. */
  private readChunks(): boolean {
    for (;;) {
      if (this.chunkLeft > 0) {
        const take = Math.min(this.chunkLeft, this.pending.length);
        if (take === 0) return false;
        this.bodyParts.push(this.pending.subarray(0, take));
        this.pending = this.pending.subarray(take);
        this.chunkLeft -= take;
        if (this.chunkLeft > 0) return false;
        this.chunkLeft = -2; // the CRLF after the chunk's data
      }
      const lineEnd = this.pending.indexOf('\r\n');
      if (lineEnd < 0) return false;
      const line = this.pending.toString('latin1', 0, lineEnd);
      this.pending = this.pending.subarray(lineEnd + 2);
      if (this.chunkLeft === -2) {
        if (line !== '') throw new Error('chunk data longer than its size');
        this.chunkLeft = -1;
      } else if (this.inTrailers) {
        if (line === '') return true; // the empty line after the trailers ends the body
      } else {
        const size = /^([0-9a-fA-F]+)(?:;.*)?$/.exec(line);
        if (size === null) throw new Error(`malformed chunk size ${JSON.stringify(line.slice(0, 40))}`);
        const length = Number.parseInt(size[1] as string, 16);
        if (length === 0) this.inTrailers = true;
        else this.chunkLeft = length;
      }
    }
  }

  private answer(): Http1Answer {
    const body = this.bodyParts.length === 1 ? (this.bodyParts[0] as Buffer) : Buffer.concat(this.bodyParts);
    return { status: this.status, headers: this.headers, body };
  }
}

export class Http1Connection {
  private readonly socket: net.Socket;
  private closed = false;
  private current: {
    reader: AnswerReader;
    settle: (outcome: Http1Outcome) => void;
  } | null = null;

  constructor(host: string, port: number, onClose?: (connection: Http1Connection) => void) {
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.on('data', (bytes: Buffer) => this.onData(bytes));
    // Errors end the connection; 'close' follows and settles a call in flight.
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      this.closed = true;
      onClose?.(this);
      const call = this.current;
      if (call === null) return;
      const answer = call.reader.finishAtClose();
      call.settle(answer ?? 'dropped');
    });
  }

  /** Open (or opening) with no call in flight: may carry the next call. */
  get usable(): boolean {
    return !this.closed && this.current === null;
  }

  /** Sends `request` (request line, headers, blank line and body, as one buffer) and reads its answer. */
  call(request: Buffer, options: Http1CallOptions = {}): Promise<Http1Outcome> {
    if (this.current !== null) throw new Error('a call is already in flight on this connection');
    if (this.closed) return Promise.resolve('dropped');
    const { signal, timeoutMs } = options;
    if (signal?.aborted) {
      this.destroy();
      return Promise.resolve('dropped');
    }
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        settle('dropped');
        this.destroy();
      };
      const settle = (outcome: Http1Outcome): void => {
        if (this.current?.settle !== settle) return;
        this.current = null;
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      this.current = { reader: new AnswerReader(), settle };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        // On a loaded machine this process may wake after a stall with both the
        // deadline passed and the answer already in: timers run before I/O in an
        // event-loop turn, so the answer is read first (setImmediate runs after
        // the turn's I/O) and only a call still unanswered then times out.
        timer = setTimeout(() => {
          setImmediate(() => {
            if (this.current?.settle !== settle) return;
            settle('timeout');
            this.destroy();
          });
        }, timeoutMs);
      }
      this.socket.write(request);
    });
  }

  destroy(): void {
    this.closed = true;
    this.socket.destroy();
  }

  private onData(bytes: Buffer): void {
    const call = this.current;
    if (call === null) {
      // Bytes nobody asked for: the connection is out of step; drop it.
      this.destroy();
      return;
    }
    let answer: Http1Answer | null;
    try {
      answer = call.reader.feed(bytes);
    } catch {
      call.settle('dropped');
      this.destroy();
      return;
    }
    if (answer === null) return;
    if (answer.headers.get('connection')?.toLowerCase() === 'close') this.destroy();
    call.settle(answer);
  }
}
