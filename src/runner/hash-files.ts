// hashFiles(pattern, …) as forgejo-runner evaluates it (act:
// pkg/exprparser/functions.go hashFiles): the files of the workspace that the
// patterns select, in the order a depth-first walk of the workspace visits
// them (names sorted by byte value), hashed as ONE sha256 over their contents
// one after another; no file selected gives ''. The usual use is a cache key:
// `${{ runner.os }}-npm-${{ hashFiles('**/package-lock.json') }}`.
//
// Patterns are GitHub's filter patterns (modules/workflows/patterns.ts),
// relative to the workspace: `**/x` at any depth, a leading `!` deselects,
// the last pattern that matches a path decides; `./` in front is dropped as
// act drops it. act reads them as .gitignore lines instead, which differs
// only for a pattern without a slash (there: any depth, here: the top).
//
// The expression evaluator is synchronous, so the walk and the reads are
// too; files are read in fixed-size chunks, never whole. Symbolic links are
// not followed (a link could point outside the workspace, and a job's
// expressions must not read the host's files).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { data } from '@actions/expressions';
import type { FunctionDefinition } from '@actions/expressions/funcs/info';
import { compileFilterPatterns } from '../modules/workflows/patterns.ts';

const CHUNK_BYTES = 64 * 1024;

/** Paths under `root` (relative, `/`-separated) of the regular files `selected` accepts, in walk order. */
function selectedFiles(root: string, selected: (relative: string) => boolean): string[] {
  const files: string[] = [];
  const walk = (dir: string, prefix: string): void => {
    const names = fs.readdirSync(dir).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    for (const name of names) {
      const relative = prefix === '' ? name : `${prefix}/${name}`;
      const stat = fs.lstatSync(path.join(dir, name));
      if (stat.isDirectory()) walk(path.join(dir, name), relative);
      else if (stat.isFile() && selected(relative)) files.push(relative);
    }
  };
  walk(root, '');
  return files;
}

/** The hex sha256 of the selected files' contents in walk order, or '' when none is selected. */
export function hashFiles(workspace: string, patterns: readonly string[]): string {
  const cleaned = patterns.map((p) => (p.startsWith('./') ? p.slice(2) : p.startsWith('!./') ? `!${p.slice(3)}` : p));
  const files = selectedFiles(workspace, compileFilterPatterns(cleaned));
  if (files.length === 0) return '';
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  for (const file of files) {
    const fd = fs.openSync(path.join(workspace, file), 'r');
    try {
      for (let read = fs.readSync(fd, buffer); read > 0; read = fs.readSync(fd, buffer))
        hash.update(buffer.subarray(0, read));
    } finally {
      fs.closeSync(fd);
    }
  }
  return hash.digest('hex');
}

/** The expression function, over the job's workspace. */
export function hashFilesFunction(workspace: () => string): FunctionDefinition {
  return {
    name: 'hashFiles',
    minArgs: 1,
    maxArgs: Number.MAX_SAFE_INTEGER,
    call: (...args: data.ExpressionData[]) => {
      const patterns = args.map((arg) => {
        if (arg.kind !== data.Kind.String) throw new Error('hashFiles() takes patterns as strings');
        return arg.coerceString();
      });
      return new data.StringData(hashFiles(workspace(), patterns));
    },
  };
}
