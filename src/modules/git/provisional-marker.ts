// A marker beside a repository directory that Gantry is creating: written
// before the directory exists, removed once the database row that owns the
// directory is committed. A process killed in between leaves the directory
// and its marker, and no row; the next creation of that name (holding the
// name in its own transaction) may then remove the leftover, where it must
// refuse a directory it did not make (an operator's files, as Forgejo's
// ErrRepoFilesAlreadyExist). Beside, not inside: `<name>.git.provisional`
// can be written before `git init` makes the directory, and no repository
// directory (all end in `.git`) has that name.
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../private-files.ts';

function markerPath(gitPath: string): string {
  return `${resolve(gitPath)}.provisional`;
}

/** Marks `gitPath` as not yet owned by a committed row (call before creating it). */
export async function markProvisional(gitPath: string): Promise<void> {
  const marker = markerPath(gitPath);
  await mkdir(dirname(marker), { recursive: true, mode: PRIVATE_DIR_MODE });
  await writeFile(
    marker,
    'A Gantry repository creation that has not committed yet; removable when no repository row has this name.\n',
    { mode: PRIVATE_FILE_MODE },
  );
}

/** True when `gitPath` was left by a creation that never committed (its marker is there). */
export async function isProvisional(gitPath: string): Promise<boolean> {
  try {
    await stat(markerPath(gitPath));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/** The row is committed (or the creation undone): the directory is no longer provisional. */
export async function clearProvisional(gitPath: string): Promise<void> {
  await rm(markerPath(gitPath), { force: true });
}
