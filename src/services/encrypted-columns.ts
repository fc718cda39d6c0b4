// Every column that holds a value encrypted with the key ring, in one list:
// key rotation re-encrypts exactly these (services/key-rotation.ts), and
// `gantry doctor` checks that each still decrypts. A new encrypted column is
// added here, or rotation would leave it under a key it may then prune.
import { REGISTRATION_TOKEN_COLUMN } from './actions/runners.ts';
import { SECRET_DATA_COLUMN } from './actions/secrets.ts';
import type { EncryptedColumn } from './key-rotation.ts';
import { WEBHOOK_COLUMNS } from './webhooks/hooks.ts';

export const ENCRYPTED_COLUMNS: readonly EncryptedColumn[] = [
  SECRET_DATA_COLUMN,
  REGISTRATION_TOKEN_COLUMN,
  ...WEBHOOK_COLUMNS,
];
