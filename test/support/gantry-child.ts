// One `gantry web` child process that a test starts, kills with SIGKILL and
// starts again on the same data folder, database and port, keeping the tail
// of its output for failure messages. It runs the sources (bin/gantry.mjs)
// unless told otherwise: the benchmarks switch every child to the production
// build (runGantryChildrenFrom), as production runs it.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { GANTRY } from './gantry-process.ts';

const KEPT_OUTPUT_CHARS = 20_000;
/** Loading the sources through tsx takes seconds of CPU; on a shared 2-core machine, many more. */
const HEALTHY_DEADLINE_MS = 180_000;

let defaultEntry = GANTRY;

/** Children started from now on in this process run `entry` (e.g. the production build) unless given one. */
export function runGantryChildrenFrom(entry: string): void {
  defaultEntry = entry;
}

export class GantryChild {
  private child: ChildProcess | null = null;
  private output = '';
  /** Bumped by every kill or stop: a request begun under an older generation may have died with it. */
  generation = 0;

  constructor(
    readonly url: string,
    private readonly env: NodeJS.ProcessEnv,
    /** Node options for the child (e.g. --cpu-prof for a bench). */
    private readonly execArgv: readonly string[] = [],
    /** The `gantry` command it runs (default: the sources, or what runGantryChildrenFrom chose). */
    private readonly entry: string = defaultEntry,
  ) {}

  /** True while a started process has not been told to die. */
  get alive(): boolean {
    return this.child !== null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The end of everything the processes printed, for failure messages. */
  tail(): string {
    return this.output;
  }

  async start(): Promise<void> {
    if (this.child) throw new Error('gantry web is already running');
    const child = spawn(process.execPath, [...this.execArgv, this.entry, 'web'], {
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-KEPT_OUTPUT_CHARS);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.child = child;
    const deadline = Date.now() + HEALTHY_DEADLINE_MS;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`gantry web exited early (${child.exitCode ?? child.signalCode}):\n${this.output}`);
      try {
        if ((await fetch(`${this.url}/api/healthz`)).status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`gantry web did not become healthy within ${HEALTHY_DEADLINE_MS / 1000} s:\n${this.output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** kill -9, and wait until the process is gone (its port free again). */
  async kill9(): Promise<void> {
    await this.end('SIGKILL');
  }

  /** A graceful stop; resolves with the exit code. */
  async stop(): Promise<number | null> {
    return this.end('SIGTERM');
  }

  private async end(signal: NodeJS.Signals): Promise<number | null> {
    const child = this.child;
    if (!child) return null;
    this.child = null;
    this.generation += 1;
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill(signal);
    return exited;
  }
}
