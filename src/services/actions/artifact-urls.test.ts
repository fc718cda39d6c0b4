import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../modules/errors.ts';
import { KeyRing } from '../../modules/crypto/key-ring.ts';
import { SecretCipher } from '../../modules/crypto/secret-cipher.ts';
import { ArtifactUrlSigner, SIGNED_URL_TTL_SEC } from './artifact-urls.ts';

function ring(...materials: string[]): KeyRing {
  const ciphers = materials.map((m) => new SecretCipher(m));
  return new KeyRing({ load: () => ({ currentId: ciphers[0]!.keyId, ciphers }), version: () => null });
}
const target = { taskId: 41, artifactId: 7, artifactName: 'build output' };
const queryOf = (url: string) => Object.fromEntries(new URL(url).searchParams);

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof AppError);
    assert.equal(error.kind, 'unauthorized');
    return error.message;
  }
  return 'accepted';
}

test('a signed URL is valid for 60 minutes, then "Error link expired"', () => {
  const signer = new ArtifactUrlSigner(ring('a'.repeat(32)), 'https://ci.example/');
  const url = signer.url('DownloadArtifact', target, 1_000_000);
  assert.ok(url.startsWith('https://ci.example/twirp/github.actions.results.api.v1.ArtifactService/DownloadArtifact?'));
  assert.deepEqual(signer.verify('DownloadArtifact', queryOf(url), 1_000_000 + SIGNED_URL_TTL_SEC - 1), target);
  assert.equal(
    refusal(() => signer.verify('DownloadArtifact', queryOf(url), 1_000_000 + SIGNED_URL_TTL_SEC)),
    'Error link expired',
  );
});

test('an upload URL does not download, and a URL signed under a retired key still verifies', () => {
  const old = new ArtifactUrlSigner(ring('old'.repeat(11)), 'https://ci.example/');
  const url = old.url('UploadArtifact', target, 1_000_000);
  assert.equal(
    refusal(() => old.verify('DownloadArtifact', queryOf(url), 1_000_000)),
    'Error unauthorized',
  );
  const rotated = new ArtifactUrlSigner(ring('new'.repeat(11), 'old'.repeat(11)), 'https://ci.example/');
  assert.deepEqual(rotated.verify('UploadArtifact', queryOf(url), 1_000_000), target);
  const stranger = new ArtifactUrlSigner(ring('new'.repeat(11)), 'https://ci.example/');
  assert.equal(
    refusal(() => stranger.verify('UploadArtifact', queryOf(url), 1_000_000)),
    'Error unauthorized',
  );
});

test('missing or malformed fields are refused as unauthorized, not as a crash', () => {
  const signer = new ArtifactUrlSigner(ring('a'.repeat(32)), 'https://ci.example/');
  const query = queryOf(signer.url('UploadArtifact', target, 1_000_000));
  for (const change of [
    { taskID: '-1' },
    { artifactID: 'x' },
    { expires: '1e9' },
    { sig: '' },
    { artifactName: undefined },
  ]) {
    const q: Record<string, unknown> = { ...query, ...change };
    assert.equal(
      refusal(() => signer.verify('UploadArtifact', q, 1_000_000)),
      'Error unauthorized',
      JSON.stringify(change),
    );
  }
  assert.equal(
    refusal(() => signer.verify('UploadArtifact', { ...query, sig: [query.sig, query.sig] }, 1_000_000)),
    'Error unauthorized',
  );
});
