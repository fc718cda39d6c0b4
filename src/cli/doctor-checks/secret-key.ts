// The key that encrypts values at rest, and whether the stored values can be
// decrypted with the keys this configuration provides. Keys are read as the
// server reads them, except that no key file is generated: a missing key is
// exactly what doctor must report, and a new one would decrypt nothing.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Config } from '../../config.ts';
import { FileKeyStore } from '../../modules/crypto/key-file.ts';
import { KeyRing, configuredKeySource, fileKeySource } from '../../modules/crypto/key-ring.ts';
import { SecretCipher } from '../../modules/crypto/secret-cipher.ts';
import type { Db } from '../../models/database.ts';
import { ENCRYPTED_COLUMNS } from '../../services/encrypted-columns.ts';
import type { EncryptedValue } from '../../services/key-rotation.ts';
import type { DoctorContext } from './context.ts';
import { requireMigratedDatabase } from './migrations.ts';
import { CheckSkipped, fail, messageOf, ok, warn } from './result.ts';
import type { Check, Finding } from './result.ts';

/** Values decrypted per encrypted column: enough to catch a wrong key, bounded on a large database. */
export const SAMPLE_PER_COLUMN = 100;

/** Stored values begin with "v1:" (or are '' for an unset webhook field): no value is under this prefix, so "not under it" selects all. */
const NO_VALUE_PREFIX = 'none:';

export type KeyInspection =
  | { state: 'configured' | 'files' | 'absent'; ring: KeyRing; keyFiles: number; previousKeys: number }
  | { state: 'unreadable'; error: string };

/** Reads the keys without creating any; with none at all, an in-memory key nothing was encrypted with stands in as current (doctor never encrypts). */
export function inspectKeys(config: Config): KeyInspection {
  const store = new FileKeyStore(config.dataDir);
  try {
    const keyFiles = store.readKeys({ skipUnusable: true }).length;
    const previousKeys = config.secretKeyPrevious.length;
    if (config.secretKey !== null) {
      return {
        state: 'configured',
        ring: new KeyRing(configuredKeySource(store, config.secretKey, config.secretKeyPrevious)),
        keyFiles,
        previousKeys,
      };
    }
    if (keyFiles > 0 || store.readCurrentId() !== null) {
      return {
        state: 'files',
        ring: new KeyRing(fileKeySource(store, config.secretKeyPrevious)),
        keyFiles,
        previousKeys,
      };
    }
    const standIn = new SecretCipher(randomBytes(32).toString('base64'));
    const previous = config.secretKeyPrevious.map((k) => new SecretCipher(k));
    const ring = new KeyRing({
      load: () => ({ currentId: standIn.keyId, ciphers: [standIn, ...previous] }),
      version: () => null,
    });
    return { state: 'absent', ring, keyFiles: 0, previousKeys };
  } catch (error) {
    return { state: 'unreadable', error: messageOf(error) };
  }
}

export interface ColumnValues {
  label: string;
  total: number;
  /** Ids of the keys the column's values are encrypted with, and how many values each. */
  byKey: Map<string, number>;
  sample: EncryptedValue[];
}

export interface StoredValues {
  columns: ColumnValues[];
  total: number;
}

/** Counts every encrypted column per key and reads a bounded sample of each (first rows by id). */
export async function readStoredValues(db: Db): Promise<StoredValues> {
  const columns: ColumnValues[] = [];
  for (const column of ENCRYPTED_COLUMNS) {
    const total = await column.count(db, NO_VALUE_PREFIX);
    const byKey = new Map<string, number>();
    for (const prefix of await column.prefixesInUse(db)) {
      const keyId = SecretCipher.keyIdOf(prefix);
      if (keyId !== null && !byKey.has(keyId))
        byKey.set(keyId, total - (await column.count(db, SecretCipher.storedPrefix(keyId))));
    }
    const sample = total === 0 ? [] : await column.batch(db, NO_VALUE_PREFIX, 0, SAMPLE_PER_COLUMN);
    columns.push({ label: column.label, total, byKey, sample });
  }
  return { columns, total: columns.reduce((n, c) => n + c.total, 0) };
}

/** Key id → number of values, over every column. */
function valuesByKey(values: StoredValues): Map<string, number> {
  const byKey = new Map<string, number>();
  for (const column of values.columns) for (const [id, n] of column.byKey) byKey.set(id, (byKey.get(id) ?? 0) + n);
  return byKey;
}

const RESTORE_KEY_FIX =
  'restore secret.key and secret-keys/ from the backup taken with the database (or set GANTRY_SECRET_KEY, and GANTRY_SECRET_KEY_PREVIOUS for older keys, to the keys the values were encrypted with); do not start the server before: it would generate a new key that decrypts nothing';

export const secretKeyCheck: Check<DoctorContext> = {
  name: 'secret key',
  onTimeout: {
    status: 'fail',
    fix: "reading the key files or the database took too long: check the data folder's file system and the database",
  },
  async run(ctx): Promise<Finding> {
    const keys = ctx.keys();
    if (keys.state === 'unreadable') return fail(`cannot read the secret keys: ${keys.error}`, RESTORE_KEY_FIX);
    const current = keys.ring.currentKeyId();
    const previous = keys.previousKeys > 0 ? `, ${keys.previousKeys} key(s) in GANTRY_SECRET_KEY_PREVIOUS` : '';
    if (keys.state === 'configured') {
      const files = keys.keyFiles > 0 ? `, ${keys.keyFiles} older key file(s) in the data folder` : '';
      return ok(`GANTRY_SECRET_KEY is set (key ${current})${previous}${files}`);
    }
    if (keys.state === 'files') {
      return ok(`current key ${current} in ${ctx.config.dataDir}, ${keys.keyFiles} key file(s)${previous}`);
    }
    const generatedAt = path.join(ctx.config.dataDir, 'secret.key');
    let values: StoredValues;
    try {
      values = await ctx.storedValues();
    } catch {
      return ok(
        `no key yet: one is generated into ${generatedAt} at first start (stored values not checked: see "encrypted values")`,
      );
    }
    const lost = [...valuesByKey(values)].filter(([id]) => !keys.ring.keyIds().includes(id));
    if (lost.length > 0) {
      const count = lost.reduce((n, [, c]) => n + c, 0);
      return fail(
        `no key: GANTRY_SECRET_KEY is unset and ${ctx.config.dataDir} holds no key file, but ${count} stored value(s) are encrypted with key(s) ${lost.map(([id]) => id).join(', ')}`,
        RESTORE_KEY_FIX,
      );
    }
    return ok(`no key yet: one is generated into ${generatedAt} at first start`);
  },
};

export const encryptedValuesCheck: Check<DoctorContext> = {
  name: 'encrypted values',
  onTimeout: {
    status: 'fail',
    fix: 'the database did not answer in time: check its load, or run doctor with a longer --timeout',
  },
  async run(ctx): Promise<Finding> {
    const keys = ctx.keys();
    if (keys.state === 'unreadable')
      throw new CheckSkipped('not checked: the secret keys cannot be read (see "secret key")');
    const values = await ctx.storedValues();
    if (values.total === 0) return ok('none stored yet (secrets, runner registration tokens, webhook secrets)');
    const ring = keys.ring;
    const current = ring.currentKeyId();
    const known = new Set(ring.keyIds());
    const byKey = valuesByKey(values);

    const missing = [...byKey].filter(([id]) => !known.has(id));
    if (missing.length > 0) {
      const count = missing.reduce((n, [, c]) => n + c, 0);
      return fail(
        `${count} of ${values.total} stored value(s) are encrypted with key(s) ${missing.map(([id]) => id).join(', ')}, which no configured key or key file holds`,
        'restore the key files (secret.key, secret-keys/<id>.key) from the backup taken with the database, or add the old key to GANTRY_SECRET_KEY_PREVIOUS',
      );
    }

    let sampled = 0;
    const broken: string[] = [];
    for (const column of values.columns) {
      for (const value of column.sample) {
        sampled += 1;
        try {
          ring.decrypt(value.stored, value.associatedData);
        } catch (error) {
          broken.push(`${column.label} #${value.id} (${messageOf(error)})`);
        }
      }
    }
    if (broken.length > 0) {
      return fail(
        `${broken.length} of ${sampled} sampled value(s) do not decrypt although their key is present: ${broken.slice(0, 3).join('; ')}${broken.length > 3 ? '; …' : ''}`,
        'those rows were altered or copied between rows: set the affected secrets again (or recreate the runner token / webhook), or restore the database from a backup',
      );
    }

    const older = [...byKey].filter(([id]) => id !== current);
    if (older.length > 0) {
      const count = older.reduce((n, [, c]) => n + c, 0);
      return warn(
        `${count} of ${values.total} stored value(s) still use older key(s) ${older.map(([id]) => id).join(', ')} (sampled ${sampled}, all decrypt)`,
        'run `gantry admin rotate-secret-key --resume` to re-encrypt them with the current key, then the old keys can go',
      );
    }
    return ok(`${values.total} stored value(s) under the current key ${current}; sampled ${sampled}, all decrypt`);
  },
};

/** For the context: stored values need a migrated database and readable keys. */
export async function storedValuesFor(ctx: DoctorContext): Promise<StoredValues> {
  const db = await requireMigratedDatabase(ctx);
  const keys = ctx.keys();
  if (keys.state === 'unreadable')
    throw new CheckSkipped('not checked: the secret keys cannot be read (see "secret key")');
  return readStoredValues(db);
}
