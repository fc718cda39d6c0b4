// `PRAGMA integrity_check` of the SQLite database. It reads every page, which
// takes minutes on a large file, and better-sqlite3 runs it synchronously
// inside native code: neither a timer nor a worker's terminate() can stop it
// (both wait for it to return). So it runs in a child node process, which the
// deadline can kill.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import type { DoctorContext } from './context.ts';
import { requireDatabase } from './database.ts';
import { fail, messageOf, ok, warn } from './result.ts';
import type { Check, Finding } from './result.ts';

// Plain CommonJS run with `node -e`: argv[1] is better-sqlite3's entry, argv[2] the database file.
// At most 20 problems are listed: enough to see what is wrong, bounded output.
const CHILD_SCRIPT = `
const Database = require(process.argv[1]);
const db = new Database(process.argv[2], { fileMustExist: true, timeout: 5000 });
try {
  process.stdout.write(JSON.stringify(db.pragma('integrity_check(20)').map((row) => row.integrity_check)));
} finally {
  db.close();
}
`;

const MAX_OUTPUT_BYTES = 64 * 1024;

/** The problems integrity_check lists (['ok'] when there are none); rejects if the check cannot run. */
export function integrityProblems(sqlitePath: string, timeoutMs: number): Promise<string[]> {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', CHILD_SCRIPT, driver, sqlitePath], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdout.length < MAX_OUTPUT_BYTES) stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < MAX_OUTPUT_BYTES) stderr += chunk.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') return reject(new Error(`integrity_check did not finish within ${timeoutMs / 1000} s`));
      if (code !== 0) {
        // The last line of a node error is its message (the stack comes before it in `node -e` output).
        const message =
          stderr.split('\n').find((line) => /^\w*Error\b/.test(line.trim())) ?? stderr.trim().split('\n').pop() ?? '';
        return reject(new Error(message.trim() || `exit ${code}`));
      }
      try {
        resolve(JSON.parse(stdout) as string[]);
      } catch {
        reject(new Error('integrity_check gave no readable answer'));
      }
    });
  });
}

const TIMEOUT_FIX = 'a large database takes longer: run `gantry doctor --timeout 600`';

export const sqliteIntegrityCheck: Check<DoctorContext> = {
  name: 'sqlite integrity',
  // The child is killed just before this deadline; a large database simply needs longer.
  onTimeout: { status: 'warn', fix: TIMEOUT_FIX },
  async run(ctx): Promise<Finding> {
    const inspected = await requireDatabase(ctx);
    if (inspected.sqlitePath === null || inspected.db === null) return ok('nothing to check yet');
    let problems: string[];
    try {
      problems = await integrityProblems(inspected.sqlitePath, Math.max(1000, ctx.timeoutMs - 250));
    } catch (error) {
      const message = messageOf(error);
      if (message.startsWith('integrity_check did not finish')) return warn(message, TIMEOUT_FIX);
      return fail(
        `integrity_check could not run: ${message}`,
        'make sure the file is readable by the user running doctor and that no process holds a long lock on it',
      );
    }
    if (problems.length === 1 && problems[0] === 'ok') return ok('integrity_check: ok');
    return fail(
      `integrity_check found ${problems.length === 20 ? 'at least 20' : problems.length} problem(s), first: ${problems[0] ?? 'unknown'}`,
      'stop every Gantry process and restore gantry.db from the last backup (see Backup and restore in the README); to salvage what is readable: `sqlite3 gantry.db .recover | sqlite3 recovered.db`',
    );
  },
};
