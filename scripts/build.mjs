// The production build (`npm run build`; `npm start` runs it first): one ESM
// bundle of the `gantry` command in dist/, which plain node runs without tsx.
//
// Why a bundle: tsx keeps a loader thread and its transpiled sources for the
// life of the process (about 55 MB of RSS at start), and @actions/* import
// JSON without import attributes, which plain node refuses; the bundle inlines
// them. Every other package stays external (a require/import of node_modules
// at run time, so better-sqlite3 finds its native module as it always does),
// which is why dist/ must stay one folder below the checkout's root:
//
//   dist/gantry.mjs       the entry: turns source maps on, then loads the bundle
//   dist/gantry-main.mjs  src/cli/run.ts and everything it imports
//   dist/gantry-main.mjs.map  the source map (stack traces name src/ lines)
//   dist/assets/, dist/templates/  the console's files (src/http/web/), found
//                         beside the bundle as they are beside index.ts/render.ts
//   ../package.json       the version (src/deps.ts), as from src/
//
// This is plain JavaScript so that it runs without tsx (a build takes well
// under a second). Each file is written under a temporary name and renamed
// into place, so two builds at once (a test and `npm start`) or a server
// reading the assets never see half a file. Nothing else ever runs dist/:
// bin/gantry.mjs (npx gantry, the tests) runs the sources, so a stale build is
// run only by someone starting dist/ by hand.
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'dist');
const WEB = path.join(ROOT, 'src/http/web');

/** Packages bundled rather than imported at run time: their JSON imports need a bundler. */
const BUNDLED_SCOPE = '@actions/';

// Source maps must be on before the bundle is compiled (node reads a module's
// map when it loads it), hence an entry of its own. The map is read at start
// and parsed on the first stack trace that is printed (see the README).
const ENTRY = `// Written by scripts/build.mjs (npm run build): the production build of the gantry command.
process.setSourceMapsEnabled(true);
await import('./gantry-main.mjs');
`;

// Bundled CommonJS code (in @actions/*) that calls require() gets node's own.
const BANNER = `import { createRequire as gantryCreateRequire } from 'node:module';
const require = gantryCreateRequire(import.meta.url);`;

/** The package name of a bare import specifier (`@scope/name/sub` → `@scope/name`). */
function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * The runtime dependencies of package.json stay imports (npm installs each at
 * node_modules/<name>, where node finds it from dist/); @actions/* and what
 * only they import (not installed at the top level for certain) are bundled.
 */
function externalDependencies(runtime) {
  return {
    name: 'external-dependencies',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        const name = packageName(args.path);
        if (name.startsWith(BUNDLED_SCOPE) || !runtime.has(name)) return undefined;
        return { path: args.path, external: true };
      });
    },
  };
}

/** Write `body` to `file` atomically (a temporary name, then a rename). */
async function writeAtomically(file, body) {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temp, body);
  await rename(temp, file);
}

/** Copy the files of `from` into `to`, and remove what `to` has that `from` no longer has. */
async function mirrorFolder(from, to) {
  const names = await readdir(from);
  for (const name of names) await writeAtomically(path.join(to, name), await readFile(path.join(from, name)));
  for (const name of await readdir(to))
    if (!names.includes(name) && !name.endsWith('.tmp')) await rm(path.join(to, name), { force: true });
}

export async function build() {
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8'));
  const result = await esbuild.build({
    entryPoints: [path.join(ROOT, 'src/cli/run.ts')],
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: path.join(OUT, 'gantry-main.mjs'),
    banner: { js: BANNER },
    sourcemap: 'linked',
    // The map names the files under src/ (and node_modules/@actions/) without their text.
    sourcesContent: false,
    plugins: [externalDependencies(new Set(Object.keys(pkg.dependencies)))],
    write: false,
    logLevel: 'warning',
  });
  for (const file of result.outputFiles) await writeAtomically(file.path, file.contents);
  await writeAtomically(path.join(OUT, 'gantry.mjs'), ENTRY);
  await mirrorFolder(path.join(WEB, 'assets'), path.join(OUT, 'assets'));
  await mirrorFolder(path.join(WEB, 'templates'), path.join(OUT, 'templates'));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await build();
