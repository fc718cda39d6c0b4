// A baseline server of the bench as a child process of its own (as `gantry
// web` is), started through tsx from its script: the script prints
// `listening <port>` once it listens and stops on SIGTERM.
import { spawn } from 'node:child_process';
import path from 'node:path';

export interface ListeningChild {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts `script` (a file of this repository) and waits for its `listening <port>` line. */
export async function startListeningChild(
  script: string,
  env: NodeJS.ProcessEnv,
  /** How errors name it, e.g. "the bare API". */
  name: string,
): Promise<ListeningChild> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: path.resolve(path.dirname(script), '../..'),
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.once('exit', (code) => reject(new Error(`${name} exited early (${code})`)));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
  });
  child.removeAllListeners('exit');
  if (child.pid === undefined) throw new Error(`${name} has no pid`);
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
