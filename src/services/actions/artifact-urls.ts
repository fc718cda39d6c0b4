// Signed URLs of the v4 artifact protocol: what CreateArtifact hands out for
// the upload (`UploadArtifact`) and GetSignedArtifactURL for the download
// (`DownloadArtifact`). Forgejo: routers/api/actions/artifactsv4.go
// buildSignature / verifySignature. The URL carries no bearer token (the
// Azure blob SDK that uploads to it sends none), so the query itself is the
// credential:
//
//   sig         URL-safe base64 HMAC-SHA256 over the length-prefixed endpoint,
//               expires and artifactName, then taskID and artifactID as
//               big-endian int64 (so no field can bleed into the next)
//   expires     Unix seconds (Forgejo writes a Go time string; the value is
//               opaque to clients)
//   artifactName, taskID, artifactID
//
// The key is derived from the instance key for this purpose alone and every
// known key verifies (a URL signed before a key rotation works until it
// expires). Comparison is constant-time. A tampered field or signature, or an
// expired link, is refused with 401 before anything else is looked at.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '../../modules/errors.ts';
import type { KeyRing } from '../../modules/crypto/key-ring.ts';

/** Forgejo's link lifetime (artifactsv4.go: 60 minutes). */
export const SIGNED_URL_TTL_SEC = 3600;
const PURPOSE = 'actions-artifact-url';
export const TWIRP_PREFIX = 'twirp/github.actions.results.api.v1.ArtifactService/';

export type SignedEndpoint = 'UploadArtifact' | 'DownloadArtifact';

export interface SignedTarget {
  taskId: number;
  artifactId: number;
  artifactName: string;
}

function lengthPrefixed(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const length = Buffer.alloc(8);
  length.writeBigUInt64BE(BigInt(bytes.length));
  return Buffer.concat([length, bytes]);
}

function int64(value: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(BigInt(value));
  return bytes;
}

function sign(key: Buffer, endpoint: SignedEndpoint, expires: string, target: SignedTarget): Buffer {
  return createHmac('sha256', key)
    .update(lengthPrefixed(endpoint))
    .update(lengthPrefixed(expires))
    .update(lengthPrefixed(target.artifactName))
    .update(int64(target.taskId))
    .update(int64(target.artifactId))
    .digest();
}

function single(value: unknown): string | undefined {
  if (Array.isArray(value)) return value.length === 1 && typeof value[0] === 'string' ? value[0] : undefined;
  return typeof value === 'string' ? value : undefined;
}

function parseId(value: string | undefined): number | null {
  if (value === undefined || !/^[1-9]\d{0,17}$/.test(value)) return null;
  return Number(value);
}

export class ArtifactUrlSigner {
  constructor(
    private readonly keys: KeyRing,
    /** ROOT_URL with its trailing slash. */
    private readonly rootUrl: string,
  ) {}

  url(endpoint: SignedEndpoint, target: SignedTarget, nowSec: number): string {
    const expires = String(nowSec + SIGNED_URL_TTL_SEC);
    const sig = sign(this.keys.derivedKeys(PURPOSE).current, endpoint, expires, target).toString('base64url');
    const query = new URLSearchParams({
      sig,
      expires,
      artifactName: target.artifactName,
      taskID: String(target.taskId),
      artifactID: String(target.artifactId),
    });
    return `${this.rootUrl}${TWIRP_PREFIX}${endpoint}?${query.toString()}`;
  }

  /** The target a signed query names; 401 `Error unauthorized` / `Error link expired` otherwise. */
  verify(endpoint: SignedEndpoint, query: Record<string, unknown>, nowSec: number): SignedTarget {
    const sig = single(query.sig);
    const expires = single(query.expires);
    const artifactName = single(query.artifactName);
    const taskId = parseId(single(query.taskID));
    const artifactId = parseId(single(query.artifactID));
    if (
      sig === undefined ||
      expires === undefined ||
      !/^\d{1,12}$/.test(expires) ||
      artifactName === undefined ||
      taskId === null ||
      artifactId === null
    )
      throw AppError.unauthorized('Error unauthorized');
    const target = { taskId, artifactId, artifactName };
    const given = Buffer.from(sig, 'base64url');
    // Only the canonical spelling: stray characters base64 decoding would skip are a tampered link too.
    if (given.toString('base64url') !== sig) throw AppError.unauthorized('Error unauthorized');
    const valid = this.keys.derivedKeys(PURPOSE).all.some((key) => {
      const expected = sign(key, endpoint, expires, target);
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
    if (!valid) throw AppError.unauthorized('Error unauthorized');
    if (Number(expires) <= nowSec) throw AppError.unauthorized('Error link expired');
    return target;
  }
}
