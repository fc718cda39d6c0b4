// Where the process logger writes: standard output, one write per turn of the
// event loop. pino's default destination (sonic-boom, asynchronous) starts a
// write through libuv's thread pool for a line as soon as none is in flight;
// with one request line per API call, under load that was a write, a thread
// hand-off and a completion per request. Here the lines logged in one turn
// are joined and handed over together once the turn's other work is done
// (setImmediate), so a line still leaves within the turn that logged it.
//
// Guarantees: lines keep their order and are never cut; writes stay
// asynchronous (a slow reader of the output never blocks the server; pino's
// destination keeps what it could not write yet). At the process's 'exit' (a
// normal stop, process.exit, an uncaught exception) the lines of the last
// turn are handed over before pino's destination writes out what it holds.
// Cost of a crash: a SIGKILL or an abort loses the lines of the turn it
// interrupts, as it loses whatever pino's destination still held before.
import pino from 'pino';

/** One per process: every logger made here shares standard output, its buffer and its exit hook. */
let shared: pino.DestinationStream | null = null;

export function stdoutPerTurn(): pino.DestinationStream {
  shared ??= createStdoutPerTurn();
  return shared;
}

function createStdoutPerTurn(): pino.DestinationStream {
  let pending = '';
  // Registered before the destination exists, so it runs before the destination's own flush at exit.
  process.once('exit', () => {
    if (pending !== '') out.write(pending);
    pending = '';
  });
  const out = pino.destination({ dest: 1, sync: false });
  const flush = (): void => {
    const text = pending;
    pending = '';
    out.write(text);
  };
  return {
    write(line: string): void {
      if (pending === '') setImmediate(flush);
      pending += line;
    },
  };
}
