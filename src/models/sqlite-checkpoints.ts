// WAL checkpoints of the server's SQLite database, on a thread of their own.
// SQLite copies the write-ahead log back into the database file (a
// checkpoint) from inside a commit, once the log has grown past 1,000 pages,
// and with synchronous = NORMAL that checkpoint is where it fsyncs the log
// and the database file. better-sqlite3 runs every statement on the event
// loop, so each such commit held every request of the server for as long as
// the disk took: tens to hundreds of milliseconds on a busy disk, a runner
// fleet's slowest FetchTask answers. Here the server's connection never
// checkpoints (wal_autocheckpoint = 0); a worker thread with a connection of
// its own runs a PASSIVE checkpoint every CHECKPOINT_INTERVAL_MS, which
// copies what it can without waiting for (or blocking) the server's reads and
// writes, and the server's next write starts the log over once it has all
// been copied, as it would after its own checkpoint. When writes never pause
// long enough for that, the server's connection copies the rest itself once
// the log passes MAX_LOG_PAGES, so the log stays bounded.
//
// Guarantees: durability is unchanged (a commit is in the log before it is
// acknowledged, as before; the checkpoint only moves it). If the thread fails
// to start or dies, the server's connection checkpoints by itself again
// (wal_autocheckpoint back to SQLite's default), so the log never grows
// without bound. A crash loses nothing a checkpoint would have kept: the log
// is replayed when the database is next opened.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';

/** SQLite's default, restored when the thread is gone. */
const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;

/** How often the thread checkpoints: often enough that the log stays a few MB at a busy fleet's write rate. */
const CHECKPOINT_INTERVAL_MS = 250;
/**
 * The log's length (pages of 4 KiB) past which the server's connection
 * checkpoints once by itself, between two of its transactions: under writes
 * that never pause long enough for the thread's copy to catch up, the log is
 * never wholly copied when the next write starts, so it never starts over
 * and would grow without bound. The thread has copied most of it by then, so
 * the server copies the rest (and waits for its fsyncs), as it did at every
 * 1,000 pages before, only when the thread falls behind.
 */
const MAX_LOG_PAGES = 4 * DEFAULT_AUTOCHECKPOINT_PAGES;
/** The log file's size kept when it starts over (SQLite keeps the file at its longest otherwise). */
const LOG_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

// CommonJS, run by the worker from source (eval), so the build needs no file of its own for it.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
const passive = db.prepare('pragma wal_checkpoint(PASSIVE)');
const timer = setInterval(() => {
  try {
    const { log } = passive.get();
    if (log > workerData.maxLogPages) parentPort.postMessage('long');
  } catch {
    // Another connection is checkpointing (a CLI command's own): the next tick copies what is left.
  }
}, workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

export interface Checkpointer {
  /** Stops the thread (its connection closed) before the server's connection closes. */
  stop(): Promise<void>;
}

/** Moves the checkpoints of `sqlite` (the server's one connection to `sqlitePath`) to a worker thread. */
export function checkpointOffThread(sqlite: BetterSqlite3.Database, sqlitePath: string): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { driver, path: sqlitePath, intervalMs: CHECKPOINT_INTERVAL_MS, maxLogPages: MAX_LOG_PAGES },
  });
  // The server's connection checkpoints again if the thread does not run (the pragma is per connection).
  const fallBack = (): void => {
    if (sqlite.open) sqlite.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
  };
  let stopping = false;
  const exited = new Promise<void>((resolve) => {
    worker.once('exit', () => {
      if (!stopping) fallBack();
      resolve();
    });
  });
  worker.once('error', fallBack);
  // The thread fell behind (MAX_LOG_PAGES): copy the rest here, between two transactions, so the next write starts the log over.
  worker.on('message', () => {
    if (sqlite.open && !sqlite.inTransaction) sqlite.pragma('wal_checkpoint(PASSIVE)');
  });
  // An idle server need not stay up for it.
  worker.unref();
  sqlite.pragma('wal_autocheckpoint = 0');
  // A log that grew long under a burst of writes is cut back to this when it starts over.
  sqlite.pragma(`journal_size_limit = ${LOG_SIZE_LIMIT_BYTES}`);
  return {
    async stop() {
      stopping = true;
      fallBack();
      // Held until the thread has closed its connection (it is unref'd while it runs).
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}
