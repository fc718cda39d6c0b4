// Runs one step's process on the host and streams its output line by line.
// The process leads a process group of its own (spawned detached), so
// stopping the step — cancelled from the API, timed out, or the daemon
// shutting down — kills the whole group at once with SIGKILL: a `sleep` a
// script started in the background dies with it rather than outliving the job.
import { spawn } from 'node:child_process';

export interface ProcessOutcome {
  /** null when the process was killed or never started. */
  exitCode: number | null;
  /** Set when the step was stopped through `signal`. */
  stopped: boolean;
  /** Set when the program could not be started (e.g. not installed). */
  spawnError?: string;
}

export interface ProcessOptions {
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  onLine: (line: string) => void;
  signal: AbortSignal;
}

/** After the process exits, output still buffered in the pipes gets this long to arrive. */
const DRAIN_MS = 500;

function lineSplitter(onLine: (line: string) => void): { push(chunk: Buffer): void; flush(): void } {
  let pending = '';
  return {
    push(chunk) {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) onLine(line.replace(/\r$/, ''));
    },
    flush() {
      if (pending !== '') onLine(pending.replace(/\r$/, ''));
      pending = '';
    },
  };
}

export function runProcess(options: ProcessOptions): Promise<ProcessOutcome> {
  return new Promise((resolve) => {
    if (options.signal.aborted) {
      resolve({ exitCode: null, stopped: true });
      return;
    }
    const child = spawn(options.command, options.args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = lineSplitter(options.onLine);
    const err = lineSplitter(options.onLine);
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    let stopped = false;
    let settled = false;
    const killGroup = (): void => {
      stopped = true;
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is already gone
      }
    };
    options.signal.addEventListener('abort', killGroup, { once: true });
    const finish = (outcome: ProcessOutcome): void => {
      if (settled) return;
      settled = true;
      options.signal.removeEventListener('abort', killGroup);
      out.flush();
      err.flush();
      resolve(outcome);
    };
    child.on('error', (error) => finish({ exitCode: null, stopped, spawnError: error.message }));
    child.on('close', (code) => finish({ exitCode: code, stopped }));
    // A grandchild that left the group may hold the pipes open: do not wait for it.
    child.on('exit', (code) => {
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish({ exitCode: code, stopped });
      }, DRAIN_MS).unref();
    });
  });
}
