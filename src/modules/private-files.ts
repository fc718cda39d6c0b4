// Everything Gantry keeps in its data folder is private to the user running
// it: the SQLite database (secrets' ciphertexts, token digests), the key that
// decrypts them, private repositories, Actions logs (which may echo secrets).
// Folders are 0700 and files 0600, whatever umask the process inherited
// (commonly 022, which leaves all of that readable by every local user).
//
// Two layers, because not every file is created by our own code:
// - restrictUmask() at start (server and CLI): files created by this process
//   AND its children — git init/receive-pack/index-pack writing repositories,
//   SQLite writing -wal/-shm — get no group/other bits. git's read-only
//   objects become 0400, as git asks for 0444.
// - Our own create calls pass PRIVATE_DIR_MODE / PRIVATE_FILE_MODE, so they
//   are private even where no entry point set the umask (a library use, a
//   test calling a module directly).
// A umask can only remove bits, so an operator's stricter umask is kept.
import { isMainThread } from 'node:worker_threads';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
/** Executable files we write for git (receive hooks): the owner runs them, nobody else reads them. */
export const PRIVATE_EXECUTABLE_MODE = 0o700;
/** The bits that must never be set on anything under the data folder. */
export const GROUP_OTHER_BITS = 0o077;

/**
 * Adds group/other to the process umask (keeping any stricter bits it had).
 * Worker threads share the process umask and may not change it: there it
 * is left alone (the main thread sets it).
 */
export function restrictUmask(): void {
  if (!isMainThread) return;
  const inherited = process.umask(GROUP_OTHER_BITS);
  process.umask(inherited | GROUP_OTHER_BITS);
}
