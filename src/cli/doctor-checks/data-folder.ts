// The data folder: where git repositories, Actions logs, the generated keys
// and (by default) the SQLite database live. Everything here uses the async
// file API, so a hung network file system runs into the check's deadline
// instead of freezing doctor.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { CURRENT_FILE_NAME, KEY_DIR_NAME, KEY_FILE_NAME } from '../../modules/crypto/key-file.ts';
import { GROUP_OTHER_BITS } from '../../modules/private-files.ts';
import type { DoctorContext } from './context.ts';
import { fail, messageOf, ok, warn } from './result.ts';
import type { Check, Finding } from './result.ts';

export const LOW_DISK_SPACE_BYTES = 1024 ** 3;

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException).code;
}

async function statOrNull(file: string): Promise<Stats | null> {
  try {
    return await fs.stat(file);
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return null;
    throw error;
  }
}

/** The folder itself, or the closest ancestor that exists (where it would be created). */
async function nearestExisting(dir: string): Promise<string> {
  let current = dir;
  while ((await statOrNull(current)) === null) {
    const parent = path.dirname(current);
    if (parent === current) break;
    current = parent;
  }
  return current;
}

function whoRuns(): string {
  return typeof process.getuid === 'function' ? `uid ${process.getuid()}` : 'this user';
}

/** Creates, flushes and deletes a file: what the server does with every push, log and key. */
async function probeWrite(dir: string): Promise<void> {
  const probe = path.join(dir, `.gantry-doctor-${process.pid}-${randomBytes(4).toString('hex')}`);
  const handle = await fs.open(probe, 'wx', 0o600);
  try {
    await handle.writeFile('gantry doctor write probe\n');
    await handle.sync();
  } finally {
    await handle.close();
    await fs.rm(probe, { force: true });
  }
}

export const dataFolderCheck: Check<DoctorContext> = {
  name: 'data folder',
  onTimeout: {
    status: 'fail',
    fix: 'the file system of the data folder does not answer (a hung network mount?): check the mount',
  },
  async run(ctx): Promise<Finding> {
    const dir = ctx.config.dataDir;
    const stat = await statOrNull(dir).catch((error: unknown) => error as Error);
    if (stat instanceof Error)
      return fail(
        `cannot look at ${dir}: ${messageOf(stat)}`,
        `make the path reachable by the user running Gantry (${whoRuns()}), or set GANTRY_DATA_DIR`,
      );
    if (stat === null) {
      const parent = await nearestExisting(dir);
      try {
        await fs.access(parent, constants.W_OK | constants.X_OK);
      } catch (error) {
        return fail(
          `${dir} does not exist and cannot be created: ${parent} is not writable (${errnoOf(error) ?? messageOf(error)})`,
          `create ${dir} and give it to the user running Gantry (${whoRuns()}), e.g. mkdir -p ${dir} && chown <user> ${dir}, or set GANTRY_DATA_DIR`,
        );
      }
      return ok(`${dir} does not exist yet; it is created at first start (${parent} is writable)`);
    }
    if (!stat.isDirectory())
      return fail(`${dir} is not a folder`, 'set GANTRY_DATA_DIR to a folder (it is created if missing)');
    try {
      await probeWrite(dir);
    } catch (error) {
      return fail(
        `cannot write in ${dir}: ${messageOf(error)}`,
        `make it writable by the user running Gantry (${whoRuns()}), e.g. chown -R <user> ${dir} && chmod u+rwx ${dir}; a read-only mount must be remounted read-write`,
      );
    }
    return ok(`${dir} is writable (a file was created, flushed and deleted)`);
  },
};

function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export const diskSpaceCheck: Check<DoctorContext> = {
  name: 'disk space',
  onTimeout: {
    status: 'fail',
    fix: 'the file system of the data folder does not answer (a hung network mount?): check the mount',
  },
  async run(ctx): Promise<Finding> {
    const where = await nearestExisting(ctx.config.dataDir);
    const stats = await fs.statfs(where);
    // bavail: what an unprivileged process may still use (root's reserve excluded).
    const free = stats.bavail * stats.bsize;
    if (free < LOW_DISK_SPACE_BYTES) {
      return warn(
        `only ${formatBytes(free)} free on the file system of ${where}`,
        'free space or move GANTRY_DATA_DIR to a larger disk: pushes, Actions logs and the SQLite database grow there, and a full disk fails pushes',
      );
    }
    return ok(`${formatBytes(free)} free on the file system of ${where}`);
  },
};

export const keyFilePermissionsCheck: Check<DoctorContext> = {
  name: 'key file permissions',
  onTimeout: {
    status: 'fail',
    fix: 'the file system of the data folder does not answer (a hung network mount?): check the mount',
  },
  async run(ctx): Promise<Finding> {
    const dir = ctx.config.dataDir;
    const keyDir = path.join(dir, KEY_DIR_NAME);
    const names = await fs.readdir(keyDir).catch((error: unknown) => {
      if (errnoOf(error) === 'ENOENT') return [] as string[];
      throw error;
    });
    const candidates = [
      path.join(dir, KEY_FILE_NAME),
      ...names.filter((n) => n.endsWith('.key') || n === CURRENT_FILE_NAME).map((n) => path.join(keyDir, n)),
    ];
    const loose: string[] = [];
    let checked = 0;
    for (const file of candidates) {
      const stat = await statOrNull(file);
      if (stat === null) continue;
      checked += 1;
      // The `current` pointer names a key id, not key material; only readable-by-others key files matter.
      if (path.basename(file) !== CURRENT_FILE_NAME && (stat.mode & 0o077) !== 0)
        loose.push(`${file} (${(stat.mode & 0o777).toString(8).padStart(4, '0')})`);
    }
    if (loose.length > 0) {
      return warn(
        `readable by other users: ${loose.join(', ')}`,
        `chmod 600 ${loose.map((l) => l.split(' (')[0]).join(' ')}; anyone who can read a key can decrypt the stored secrets`,
      );
    }
    if (checked === 0)
      return ok(
        ctx.config.secretKey !== null
          ? 'no key files (GANTRY_SECRET_KEY is set)'
          : 'no key file yet (generated with mode 0600 at first start)',
      );
    return ok(`${checked} key file(s), none readable by other users (0600)`);
  },
};

/**
 * What Gantry creates owner-only (modules/private-files.ts) but an older
 * version, a restore or an operator may have left open: the data folder, the
 * SQLite files and the top folders. Only these few paths are looked at, not
 * the whole tree (a large installation has millions of git objects): a
 * 0700 data folder already keeps other users out of everything inside it.
 */
const PRIVATE_PATHS = [
  '',
  'gantry.db',
  'gantry.db-wal',
  'gantry.db-shm',
  'git',
  path.join('git', 'repositories'),
  'actions_log',
  KEY_DIR_NAME,
];

export const dataPermissionsCheck: Check<DoctorContext> = {
  name: 'data permissions',
  onTimeout: {
    status: 'fail',
    fix: 'the file system of the data folder does not answer (a hung network mount?): check the mount',
  },
  async run(ctx): Promise<Finding> {
    const dir = ctx.config.dataDir;
    const open: string[] = [];
    let checked = 0;
    for (const name of PRIVATE_PATHS) {
      const file = path.join(dir, name);
      const stat = await statOrNull(file);
      if (stat === null) continue;
      checked += 1;
      if ((stat.mode & GROUP_OTHER_BITS) !== 0)
        open.push(`${file} (${(stat.mode & 0o777).toString(8).padStart(4, '0')})`);
    }
    if (open.length > 0) {
      return warn(
        `open to other users: ${open.join(', ')}`,
        `chmod -R go-rwx ${dir}; the database, private repositories and Actions logs are for the user running Gantry only (Gantry creates folders 0700 and files 0600)`,
      );
    }
    if (checked === 0) return ok(`${dir} does not exist yet (created 0700 at first start)`);
    return ok(`${dir} and its database and top folders are owner-only`);
  },
};

export const repositoriesFolderCheck: Check<DoctorContext> = {
  name: 'repositories folder',
  onTimeout: {
    status: 'fail',
    fix: 'the file system of the data folder does not answer (a hung network mount?): check the mount',
  },
  async run(ctx): Promise<Finding> {
    const dir = path.join(ctx.config.dataDir, 'git', 'repositories');
    const stat = await statOrNull(dir);
    if (stat === null) return ok(`${dir} does not exist yet (created at first start)`);
    try {
      const owners = await fs.readdir(dir);
      await fs.access(dir, constants.R_OK | constants.W_OK | constants.X_OK);
      return ok(`${dir} is readable and writable (${owners.length} owner folder(s))`);
    } catch (error) {
      return fail(
        `cannot use ${dir}: ${messageOf(error)}`,
        `give it back to the user running Gantry (${whoRuns()}): chown -R <user> ${dir}; clones and pushes fail until then`,
      );
    }
  },
};
