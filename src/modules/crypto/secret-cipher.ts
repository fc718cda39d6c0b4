// AES-256-GCM for values encrypted at rest (Actions secrets, webhook secrets).
// Stored form: "v1:<key id>:<base64 nonce|ciphertext|tag>". The associated data
// binds a value to its place (scope and name), so a ciphertext copied to another
// row fails to decrypt instead of leaking there.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export class SecretCipher {
  private readonly key: Buffer;
  /** Short fingerprint of the key, stored with each value so rotation can tell old from new. */
  readonly keyId: string;
  /** deriveKey's answers by purpose. */
  private readonly derived = new Map<string, Buffer>();

  constructor(keyMaterial: string) {
    // Any string of 32+ characters is accepted as configuration; SHA-256 turns it
    // into exactly 32 key bytes.
    this.key = createHash('sha256').update(keyMaterial, 'utf8').digest();
    this.keyId = createHash('sha256').update(this.key).digest('hex').slice(0, 8);
  }

  encrypt(plaintext: string, associatedData: string): string {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const sealed = Buffer.concat([nonce, body, cipher.getAuthTag()]);
    return `${SecretCipher.storedPrefix(this.keyId)}${sealed.toString('base64')}`;
  }

  decrypt(stored: string, associatedData: string): string {
    const [version, keyId, payload] = stored.split(':');
    if (version !== 'v1' || payload === undefined) throw new Error('unknown secret format');
    if (keyId !== this.keyId) throw new Error(`value was encrypted with another key (${keyId})`);
    const sealed = Buffer.from(payload, 'base64');
    if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new Error('secret value is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(0, NONCE_BYTES));
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)),
      decipher.final(),
    ]).toString('utf8');
  }

  /**
   * A 32-byte key for another purpose (signing runtime tokens, artifact
   * URLs), derived with HKDF-SHA256 so that no key serves two purposes and
   * none reveals the encryption key.
   */
  deriveKey(purpose: string): Buffer {
    // Derived once per purpose: every task answer signs a runtime token with one.
    let derived = this.derived.get(purpose);
    if (derived === undefined) {
      derived = Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `gantry:${purpose}`, 32));
      this.derived.set(purpose, derived);
    }
    return derived;
  }

  /** How every value stored under key `keyId` begins (for finding values under other keys). */
  static storedPrefix(keyId: string): string {
    return `v1:${keyId}:`;
  }

  /** Which key encrypted a stored value (for rotation). */
  static keyIdOf(stored: string): string | null {
    const parts = stored.split(':');
    return parts[0] === 'v1' && parts[1] ? parts[1] : null;
  }
}
