// The key that encrypts secrets at rest: from configuration, or generated once
// into the data folder with owner-only permissions.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const KEY_FILE_NAME = 'secret.key';

export function loadOrCreateSecretKey(dataDir: string, configured: string | null): string {
  if (configured) return configured;
  const file = path.join(dataDir, KEY_FILE_NAME);
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    if (existing.length >= 32) return existing;
    throw new Error(`${file} holds no usable key (expected 32+ characters); restore it from a backup`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32).toString('base64');
  // `wx` fails if another process created the file first; then use theirs.
  try {
    fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw error;
  }
}
