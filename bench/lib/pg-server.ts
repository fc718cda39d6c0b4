// What the bench's PostgreSQL server does while Gantry runs: its CPU as the
// kernel counts it (Linux /proc), and what its backends wait on.
//
// The server is the postmaster and its children (one backend per connection,
// plus the background workers). A child that exits during a window is counted
// through the postmaster's cutime/cstime once it is reaped.
import fs from 'node:fs/promises';
import { sql } from 'kysely';
import type { Db } from '../../src/models/database.ts';

const TICKS_PER_SECOND = 100;

interface Stat {
  ppid: number;
  /** utime + stime, in ticks. */
  own: number;
  /** cutime + cstime (children reaped), in ticks. */
  children: number;
}

async function readStat(pid: number | string): Promise<Stat | null> {
  let text: string;
  try {
    text = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // exited meanwhile
  }
  // The fields after the command name, which may itself hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return {
    ppid: Number(fields[1]),
    own: Number(fields[11]) + Number(fields[12]),
    children: Number(fields[13]) + Number(fields[14]),
  };
}

/** A reader of the CPU seconds the PostgreSQL server behind `db` has used so far. */
export async function pgServerCpu(db: Db): Promise<() => Promise<number>> {
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  const backend = await readStat(rows[0]!.pid);
  if (!backend) throw new Error('the PostgreSQL backend is not a process on this machine');
  const postmaster = backend.ppid;
  return async () => {
    const root = await readStat(postmaster);
    if (!root) throw new Error('the PostgreSQL server exited');
    let ticks = root.own + root.children;
    for (const entry of await fs.readdir('/proc')) {
      if (entry.charCodeAt(0) > 57) continue; // not a pid
      const child = await readStat(entry);
      if (child && child.ppid === postmaster) ticks += child.own;
    }
    return ticks / TICKS_PER_SECOND;
  };
}

/**
 * Samples what Gantry's backends are doing every `intervalMs` until stopped:
 * counts of (state, wait event) over every sample and backend, e.g.
 * "active Lock:transactionid" (waiting for another transaction's row lock),
 * "idle in transaction Client:ClientRead" (waiting for Gantry's next
 * statement while holding its locks), "active -" (running).
 */
export function sampleWaits(db: Db, intervalMs: number): { stop(): Promise<Map<string, number>> } {
  const counts = new Map<string, number>();
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      // A backend waiting for a lock also says which lock: its relation and mode (a row's tuple lock).
      const { rows } = await sql<{
        state: string | null;
        type: string | null;
        event: string | null;
        lock: string | null;
      }>`
        select a.state, a.wait_event_type as type, a.wait_event as event,
          (select string_agg(coalesce(l.relation::regclass::text, l.locktype) || ' ' || l.mode, ',')
             from pg_locks l where l.pid = a.pid and not l.granted) as lock
        from pg_stat_activity a
        where a.datname = current_database() and a.pid <> pg_backend_pid() and a.backend_type = 'client backend'`.execute(
        db,
      );
      for (const row of rows) {
        const key = `${row.state ?? '?'} ${row.type ? `${row.type}:${row.event}` : '-'}${row.lock ? ` (${row.lock})` : ''}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return counts;
    },
  };
}
