// A Gantry server as a child process (`gantry web`), for tests of what only a
// real process shows: exit codes, signals, kill -9.
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';

/** The CLI entry the tests spawn. */
export const GANTRY = path.resolve('bin/gantry.mjs');

/** Resolves once `url` answers /api/healthz with 200; rejects if the process exits or 30 s pass. */
export async function waitForHealthy(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`gantry web exited early (${child.exitCode}):\n${output()}`);
    try {
      if ((await fetch(`${url}/api/healthz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`gantry web did not become healthy:\n${output()}`);
}
