// Where the process logger writes: standard output, in batches. pino's
// default destination (sonic-boom, asynchronous) starts a write through
// libuv's thread pool for a line as soon as none is in flight; with one
// request line per API call, under load that was a write, a thread hand-off
// and a completion per request. Writing the lines of one turn of the event
// loop together still cost one hand-off per turn, and a busy server turns its
// loop for every request or two: about 5 µs of a 100 µs GET. Here lines are
// joined and handed over FLUSH_DELAY_MS after the first of a batch (or at
// once when a batch reaches FLUSH_BYTES), so a busy server makes one write
// for tens of requests, and a line reaches standard output at most
// FLUSH_DELAY_MS after it was logged. A batch is handed over as bytes, encoded
// once: given a string, pino's destination measured its UTF-8 length on the
// way in, encoded it to write it and encoded it again once written (about a
// microsecond per request line at 8,000 lines a second).
//
// Guarantees: lines keep their order and are never cut; writes stay
// asynchronous (a slow reader of the output never blocks the server; pino's
// destination keeps what it could not write yet). At the process's 'exit' (a
// normal stop, process.exit, an uncaught exception) the pending lines are
// handed over before pino's destination writes out what it holds.
// Cost of a crash: a SIGKILL or an abort loses the lines of the last
// FLUSH_DELAY_MS, as it loses whatever pino's destination still held before.
import pino from 'pino';

/** The longest a logged line waits for the batch it joins. */
export const FLUSH_DELAY_MS = 10;
/** A batch this long is handed over at once (pino's destination writes 16 KiB and more in one call). */
const FLUSH_BYTES = 64 * 1024;

/** One per process: every logger made here shares standard output, its buffer and its exit hook. */
let shared: pino.DestinationStream | null = null;

export function stdoutBatched(): pino.DestinationStream {
  shared ??= createStdoutBatched();
  return shared;
}

function createStdoutBatched(): pino.DestinationStream {
  let pending = '';
  // Registered before the destination exists, so it runs before the destination's own flush at exit.
  process.once('exit', () => {
    if (pending !== '') out.write(Buffer.from(pending, 'utf8'));
    pending = '';
  });
  // In 'buffer' mode sonic-boom's write takes bytes; its type declares strings only.
  const out = pino.destination({ dest: 1, sync: false, contentMode: 'buffer' }) as unknown as {
    write(bytes: Buffer): boolean;
  };
  let timer: NodeJS.Timeout | null = null;
  const flush = (): void => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    const text = pending;
    pending = '';
    out.write(Buffer.from(text, 'utf8'));
  };
  return {
    write(line: string): void {
      // Unref'd: a pending batch never keeps the process alive ('exit' writes it).
      if (pending === '') timer = setTimeout(flush, FLUSH_DELAY_MS).unref();
      pending += line;
      if (pending.length >= FLUSH_BYTES) flush();
    },
  };
}
