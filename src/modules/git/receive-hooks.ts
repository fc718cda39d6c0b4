// The hooks directory Gantry owns and the post-receive hook that tells the
// server which refs a push really changed. Every receive-pack Gantry starts
// points core.hooksPath here (on the command line, so a repository's own
// config or hooks/ folder can never take its place).
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_EXECUTABLE_MODE } from '../private-files.ts';

/** One line of post-receive input: `<old-oid> SP <new-oid> SP <ref>`. */
export interface RefUpdate {
  /** All zeros when the ref was created. */
  oldOid: string;
  /** All zeros when the ref was deleted. */
  newOid: string;
  ref: string;
}

/** Names the file the hook copies its stdin to; set per receive-pack process. */
export const REF_UPDATES_FILE_ENV = 'GANTRY_REF_UPDATES_FILE';

// A plain copy of stdin, nothing else: the hook runs after the refs are
// updated, so it must not be able to fail a push, and anything it printed
// would reach the pusher's terminal. noclobber (set -C) makes the shell refuse
// a path that already exists, so a file or symlink planted under the
// (random) name in the temp folder is never written through. Without the
// variable (a receive-pack not started by serviceRpc) the input is drained so
// git does not see SIGPIPE.
const POST_RECEIVE = `#!/bin/sh
# Written by Gantry (src/modules/git/receive-hooks.ts); rewritten at startup.
if [ -n "$${REF_UPDATES_FILE_ENV}" ]; then
	set -C
	exec cat >"$${REF_UPDATES_FILE_ENV}"
fi
exec cat >/dev/null
`;

/**
 * Create `dir` and write Gantry's hooks into it. Idempotent; call once at
 * startup. Each script is written to a temporary name and renamed into place
 * so a push running meanwhile never executes a half-written file.
 */
export async function ensureHooks(dir: string): Promise<string> {
  const hooksDir = resolve(dir);
  await mkdir(hooksDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const target = join(hooksDir, 'post-receive');
  const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temp, POST_RECEIVE, { mode: PRIVATE_EXECUTABLE_MODE });
  // writeFile's mode is filtered by the umask and ignored for an existing file.
  // Owner-only: git runs the hook as the user running Gantry.
  await chmod(temp, PRIVATE_EXECUTABLE_MODE);
  await rename(temp, target);
  return hooksDir;
}

const OID = '(?:[0-9a-f]{40}|[0-9a-f]{64})';
const UPDATE_LINE = new RegExp(`^(${OID}) (${OID}) (\\S+)$`);

/**
 * Parse post-receive input. Only complete lines count: if git was killed
 * while the hook ran, a trailing partial line is dropped, not misread.
 */
export function parseRefUpdates(text: string): RefUpdate[] {
  const lines = text.split('\n');
  lines.pop(); // after the last newline: empty, or an incomplete line
  const updates: RefUpdate[] = [];
  for (const line of lines) {
    const m = UPDATE_LINE.exec(line);
    if (m === null) continue;
    updates.push({ oldOid: m[1] as string, newOid: m[2] as string, ref: m[3] as string });
  }
  return updates;
}

/** The updates recorded in `file`; none when the hook never ran (nothing changed). */
export async function readRefUpdates(file: string): Promise<RefUpdate[]> {
  try {
    return parseRefUpdates(await readFile(file, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}
