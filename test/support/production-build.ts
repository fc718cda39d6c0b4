// The production build (`npm run build`: scripts/build.mjs writes dist/), for
// what must run Gantry as production does: the build's own test and the
// benchmarks. Every other test runs the sources (bin/gantry.mjs), so none can
// pass on a stale bundle. Built once per process, by the same script as
// `npm start`; the script renames each file into place, so processes building
// at once never load half a file.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The built `gantry` command (`node dist/gantry.mjs web` is what `npm start` runs). */
export const BUILT_GANTRY = path.join(ROOT, 'dist/gantry.mjs');
/** The bundle it loads, beside its source map. */
export const BUILT_BUNDLE = path.join(ROOT, 'dist/gantry-main.mjs');

let building: Promise<string> | null = null;

/** Builds dist/ from the sources as they are now (once per process); resolves with the entry. */
export function buildGantry(): Promise<string> {
  building ??= run(process.execPath, [path.join(ROOT, 'scripts/build.mjs')], { cwd: ROOT }).then(() => BUILT_GANTRY);
  return building;
}
