// The key ring that encrypts values at rest (Actions secrets now, webhook
// secrets later): one current key for encryption, every known key for
// decryption, each addressed by the id stored with the value
// ("v1:<key id>:…", see secret-cipher.ts).
//
// Keys come from the configuration (GANTRY_SECRET_KEY, plus
// GANTRY_SECRET_KEY_PREVIOUS for decryption) or from files in the data folder
// (key-file.ts). A running server follows a rotation without a restart:
// before encrypting it checks, at most once per interval, whether the
// `current` pointer changed, and a value under a key id it does not know
// makes it re-read the keys before giving up.
import { SecretCipher } from './secret-cipher.ts';
import { FileKeyStore } from './key-file.ts';

export const DEFAULT_KEY_CHECK_INTERVAL_MS = 1000;

export interface LoadedKeys {
  currentId: string;
  ciphers: SecretCipher[];
}

export interface KeySource {
  /** Reads every key; throws with a message naming what is wrong. */
  load(): LoadedKeys;
  /** Changes when the current key may have changed; null when it never changes while running. */
  version(): string | null;
}

export interface KeyRingOptions {
  checkIntervalMs?: number;
  now?: () => number;
  /** Called when a periodic re-read fails (the keys in memory stay in use). */
  onRefreshError?: (error: unknown) => void;
}

export class UnknownKeyError extends Error {
  constructor(readonly keyId: string) {
    super(
      `value was encrypted with key ${keyId}, which is not in the key ring; restore its key file or list it in GANTRY_SECRET_KEY_PREVIOUS`,
    );
  }
}

export class KeyRing {
  private ciphers = new Map<string, SecretCipher>();
  private current!: SecretCipher;
  private lastVersion: string | null = null;
  private lastCheckMs = 0;
  readonly checkIntervalMs: number;
  private readonly now: () => number;

  constructor(
    private readonly source: KeySource,
    private readonly options: KeyRingOptions = {},
  ) {
    this.checkIntervalMs = options.checkIntervalMs ?? DEFAULT_KEY_CHECK_INTERVAL_MS;
    this.now = options.now ?? Date.now;
    this.reload();
  }

  /** Which key encrypted a stored value, or null if it is not in the stored format. */
  static keyIdOf(stored: string): string | null {
    return SecretCipher.keyIdOf(stored);
  }

  /** Re-reads every key from the source. */
  reload(): void {
    // The version is taken first: a change racing with the read is seen at the next check.
    const version = this.source.version();
    const loaded = this.source.load();
    const ciphers = new Map<string, SecretCipher>();
    for (const cipher of loaded.ciphers) ciphers.set(cipher.keyId, cipher);
    const current = ciphers.get(loaded.currentId);
    if (!current) throw new Error(`the current key ${loaded.currentId} is not among the loaded keys`);
    this.ciphers = ciphers;
    this.current = current;
    this.lastVersion = version;
    this.lastCheckMs = this.now();
  }

  /** The id of the key new values are encrypted with. */
  currentKeyId(): string {
    this.refreshIfStale();
    return this.current.keyId;
  }

  keyIds(): string[] {
    return [...this.ciphers.keys()];
  }

  encrypt(plaintext: string, associatedData: string): string {
    this.refreshIfStale();
    return this.current.encrypt(plaintext, associatedData);
  }

  /**
   * Keys derived for `purpose` (SecretCipher.deriveKey): the current key's to
   * sign with, and every known key's to verify with, so what was signed before
   * a rotation stays valid until it expires.
   */
  derivedKeys(purpose: string): { current: Buffer; all: Buffer[] } {
    this.refreshIfStale();
    return {
      current: this.current.deriveKey(purpose),
      all: [...this.ciphers.values()].map((cipher) => cipher.deriveKey(purpose)),
    };
  }

  decrypt(stored: string, associatedData: string): string {
    const keyId = KeyRing.keyIdOf(stored);
    if (!keyId) throw new Error('unknown secret format');
    let cipher = this.ciphers.get(keyId);
    if (!cipher) {
      // Another process may have added a key since this ring was read.
      this.reload();
      cipher = this.ciphers.get(keyId);
      if (!cipher) throw new UnknownKeyError(keyId);
    }
    return cipher.decrypt(stored, associatedData);
  }

  private refreshIfStale(): void {
    const now = this.now();
    if (now - this.lastCheckMs < this.checkIntervalMs) return;
    this.lastCheckMs = now;
    try {
      const version = this.source.version();
      if (version !== null && version !== this.lastVersion) this.reload();
    } catch (error) {
      // Keep encrypting with the key in memory: it stays decryptable, as keys are never deleted while in use.
      this.options.onRefreshError?.(error);
    }
  }
}

export interface KeyRingConfig {
  dataDir: string;
  /** GANTRY_SECRET_KEY: when set, it is the current key and no key file is created. */
  configuredKey: string | null;
  /** GANTRY_SECRET_KEY_PREVIOUS: keys for decryption only. */
  previousKeys: readonly string[];
}

/** The file-backed source: keys in the data folder, the pointer naming the current one. */
export function fileKeySource(store: FileKeyStore, previousKeys: readonly string[]): KeySource {
  return {
    load: () => {
      const keys = store.readKeys();
      const legacy = keys.find((k) => k.path === store.legacyPath);
      const currentId = store.readCurrentId() ?? legacy?.id;
      if (!currentId) throw new Error(`no secret key found in ${store.dataDir}`);
      if (!keys.some((k) => k.id === currentId)) {
        throw new Error(
          `${store.currentPath} names key ${currentId}, but no key file in ${store.dirPath} holds it; restore it from a backup`,
        );
      }
      return {
        currentId,
        ciphers: [...keys.map((k) => new SecretCipher(k.material)), ...previousKeys.map((k) => new SecretCipher(k))],
      };
    },
    version: () => store.version(),
  };
}

/**
 * The configured source: GANTRY_SECRET_KEY is current. Keys left in the data
 * folder (from before the key was configured) still decrypt, so switching
 * from the generated key to a configured one loses nothing.
 */
export function configuredKeySource(
  store: FileKeyStore,
  configuredKey: string,
  previousKeys: readonly string[],
): KeySource {
  const current = new SecretCipher(configuredKey);
  const previous = previousKeys.map((k) => new SecretCipher(k));
  return {
    load: () => ({
      currentId: current.keyId,
      ciphers: [
        ...store.readKeys({ skipUnusable: true }).map((k) => new SecretCipher(k.material)),
        ...previous,
        current,
      ],
    }),
    version: () => null,
  };
}

/** Builds the ring from the configuration, generating the first key file when none is configured. */
export function openKeyRing(
  config: KeyRingConfig,
  options: KeyRingOptions = {},
): { ring: KeyRing; store: FileKeyStore; configured: boolean } {
  const store = new FileKeyStore(config.dataDir);
  if (config.configuredKey) {
    return {
      ring: new KeyRing(configuredKeySource(store, config.configuredKey, config.previousKeys), options),
      store,
      configured: true,
    };
  }
  store.ensureKey();
  return { ring: new KeyRing(fileKeySource(store, config.previousKeys), options), store, configured: false };
}
