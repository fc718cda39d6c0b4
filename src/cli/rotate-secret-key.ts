// `gantry admin rotate-secret-key`: a new key for secrets at rest, and every
// stored secret re-encrypted with it, while servers keep running.
//
// With generated keys (GANTRY_SECRET_KEY unset): a new key file is written
// (0600) into <data>/secret-keys/, the `current` pointer is switched to it
// atomically (running servers notice within a second and encrypt with it),
// then values under older keys are re-encrypted in batches with
// compare-and-swap updates. Old keys stay until `--prune`, so an interrupted
// run loses nothing; `--resume` finishes it without making yet another key.
// With GANTRY_SECRET_KEY set, the new key comes from the configuration: the
// command re-encrypts what is not under it yet, or says what to set.
import { setTimeout as delay } from 'node:timers/promises';
import type { Config } from '../config.ts';
import { createDeps } from '../deps.ts';
import { FileKeyStore } from '../modules/crypto/key-file.ts';
import type { RotationReport } from '../services/key-rotation.ts';
import { CliError } from './cli-error.ts';

export interface RotateOptions {
  /** Finish an earlier rotation: re-encrypt under the current key without creating one. */
  resume?: boolean;
  /** Afterwards, delete key files that no stored value needs any more. */
  prune?: boolean;
  batchSize?: number;
  /** Stop after this many batches (finish later with `resume`). */
  maxBatches?: number;
  /** Where progress lines go (stdout by default). */
  print?: (line: string) => void;
  /** How long running servers get to switch to a new key before re-encryption starts. */
  settleMs?: number;
}

export interface RotateResult extends RotationReport {
  /** The key this run created (generated keys only). */
  newKeyId: string | null;
  /** Paths of the key files `prune` removed. */
  pruned: string[];
}

const ENV_GUIDANCE =
  'To rotate a configured key: set GANTRY_SECRET_KEY to a new key (e.g. `openssl rand -base64 32`) and ' +
  'GANTRY_SECRET_KEY_PREVIOUS to the old one, restart Gantry (with several servers: first add the new key to ' +
  'GANTRY_SECRET_KEY_PREVIOUS everywhere, then swap the two), run this command again, then remove GANTRY_SECRET_KEY_PREVIOUS.';

export async function rotateSecretKey(config: Config, opts: RotateOptions = {}): Promise<RotateResult> {
  const print = opts.print ?? ((line: string) => console.log(line));
  const deps = await createDeps({ ...config, logLevel: 'warn' });
  let stopRequested = false;
  const onSignal = (): void => {
    if (!stopRequested) print('stopping after the current batch (no value is lost; finish later with --resume)');
    stopRequested = true;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const { keys, keyRotation } = deps.services;
    const configured = config.secretKey !== null;
    const store = new FileKeyStore(config.dataDir);
    let newKeyId: string | null = null;

    if (configured) {
      if (!opts.resume)
        print(
          'GANTRY_SECRET_KEY is set, so new keys come from the configuration; re-encrypting what is not under it yet.',
        );
    } else if (!opts.resume) {
      const key = store.addKey();
      store.setCurrent(key.id);
      keys.reload();
      newKeyId = key.id;
      print(`created key ${key.id} (${key.path}); new secrets are encrypted with it from now on`);
      const settleMs = opts.settleMs ?? keys.checkIntervalMs + 500;
      print(`waiting ${(settleMs / 1000).toFixed(1)} s for running servers to switch to it`);
      await delay(settleMs);
    }

    const target = keys.currentKeyId();
    const remaining = await keyRotation.countRemaining();
    if (remaining === 0) print(`every secret is already encrypted with the current key ${target}`);
    if (remaining === 0 && configured) print(ENV_GUIDANCE);
    if (remaining > 0) print(`re-encrypting ${remaining} secret(s) with key ${target}`);

    const report = await keyRotation.reencryptAll({
      batchSize: opts.batchSize,
      maxBatches: opts.maxBatches,
      shouldStop: () => stopRequested,
      onProgress: ({ done, total }) => print(`re-encrypted ${done}/${total}`),
    });

    for (const failure of report.failed)
      print(`could not re-encrypt ${failure.column} #${failure.id}: ${failure.reason}`);
    if (report.stopped) {
      print(
        `stopped: ${report.remaining} secret(s) still use older keys (which stay available); finish with: gantry admin rotate-secret-key --resume`,
      );
    } else if (report.remaining === 0) {
      if (remaining > 0)
        print(
          `done: ${report.reencrypted} secret(s) re-encrypted; every secret is now encrypted with key ${report.keyId}`,
        );
    } else {
      print(
        `${report.remaining} secret(s) still use older keys (written meanwhile, or not decryptable); run again with --resume`,
      );
    }

    const pruned: string[] = [];
    if (opts.prune) {
      if (report.stopped || report.remaining > 0) {
        print('not pruning: some secrets still need older keys');
      } else {
        const inUse = await keyRotation.keyIdsInUse();
        const current = keys.currentKeyId();
        for (const key of store.readKeys({ skipUnusable: true })) {
          if (key.id === current || inUse.has(key.id)) continue;
          const removed = store.removeKey(key.id);
          if (removed) {
            pruned.push(removed);
            print(`removed unused key ${key.id} (${removed})`);
          }
        }
        if (pruned.length === 0) print('no unused key files to remove');
      }
    }

    if (report.failed.length > 0) {
      throw new CliError(
        `${report.failed.length} secret(s) could not be decrypted and were left as they are: restore their key file or list the key in GANTRY_SECRET_KEY_PREVIOUS`,
      );
    }
    return { ...report, newKeyId, pruned };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await deps.close();
  }
}
