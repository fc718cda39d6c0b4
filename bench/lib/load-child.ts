// measure() in a child process of its own: the load generator then shares no
// process (and no event loop, no garbage collector) with the bench or with the
// servers it measures. Run as a script it reads its options from LOAD_OPTIONS
// (JSON) and prints the Measurement as one JSON line.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { measure, MeasurementError } from './autocannon.ts';
import type { Measurement, MeasureOptions } from './autocannon.ts';

export type ChildMeasureOptions = Omit<MeasureOptions, 'onProgress'>;

export async function measureInChild(options: ChildMeasureOptions): Promise<Measurement> {
  const script = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: path.resolve(path.dirname(script), '../..'),
    env: { ...process.env, LOAD_OPTIONS: JSON.stringify(options) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  const line = out.trim().split('\n').pop() ?? '';
  if (code !== 0) throw new MeasurementError(`load generator exited with ${code}: ${err.trim() || line}`);
  return JSON.parse(line) as Measurement;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const options = JSON.parse(process.env.LOAD_OPTIONS ?? '{}') as ChildMeasureOptions;
  try {
    const result = await measure(options);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}
