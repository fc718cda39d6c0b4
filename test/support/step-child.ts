// A real client library run as a job step would run it: in a child process of
// its own, with only the environment a runner sets (so the test process's env
// is never touched), answering one JSON command with one JSON result. Both
// ends live here: the test calls runStepChild; the script (a test/support
// file that is also a command) calls answerAsStepChild.
//
// As a script: `node --import tsx <file> '<json command>'` prints
// `::gantry-result::<json>` on its last stdout line, or fails with exit 1.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const RESULT_MARK = '::gantry-result::';

export interface ChildOutcome {
  code: number;
  result: unknown;
  stdout: string;
  stderr: string;
}

/**
 * Runs `script` (a module URL, its `import.meta.url`) on `command` with `env`
 * plus PATH and HOME; resolves with its exit code and result (never rejects
 * on a failed command).
 */
export function runStepChild(script: string, command: unknown, env: Record<string, string>): Promise<ChildOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(script), JSON.stringify(command)], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.split('\n').find((l) => l.startsWith(RESULT_MARK));
      resolve({
        code: code ?? -1,
        result: line === undefined ? undefined : JSON.parse(line.slice(RESULT_MARK.length)),
        stdout,
        stderr,
      });
    });
  });
}

/** When `script` is the process's entry point: answers its command with `run`, as runStepChild reads it. */
export function answerAsStepChild<C>(script: string, run: (command: C) => Promise<unknown>): void {
  if (process.argv[1] !== fileURLToPath(script)) return;
  run(JSON.parse(process.argv[2] ?? '{}') as C)
    .then((result) => process.stdout.write(`\n${RESULT_MARK}${JSON.stringify(result)}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    });
}
