// Helpers of the security tests (test/security/): accounts of every kind and
// git's first request, as a git client sends it.
import assert from 'node:assert/strict';
import type { TestServer, TestUser } from './server.ts';
import { basicAuth } from './server.ts';

/**
 * A user created through the admin API as an administrator would (restricted
 * or private accounts have no other way in), with an `all` token.
 */
export async function createUserAs(
  s: TestServer,
  name: string,
  options: { restricted?: boolean; visibility?: 'public' | 'limited' | 'private' },
): Promise<TestUser> {
  const password = `pw-${name}-12345`;
  const created = await s.api('POST', '/admin/users', {
    token: s.admin.token,
    body: { username: name, email: `${name}@example.com`, password, must_change_password: false, ...options },
  });
  assert.equal(created.status, 201, created.text);
  const user = await s.server.deps.services.accounts.findByName(name);
  assert.ok(user);
  const partial = { user, name, password, token: '', client: s.clientWith(null) };
  const token = await s.tokenFor(partial, ['all']);
  return { ...partial, token, client: s.clientWith(`token ${token}`) };
}

export interface GitAnswer {
  status: number;
  contentType: string;
  challenge: string | null;
  text: string;
}

/** `GET /{owner}/{repo}.git/info/refs?service=…`: what decides whether git may clone (upload-pack) or push (receive-pack). */
export async function gitInfoRefs(
  s: TestServer,
  owner: string,
  repo: string,
  service: 'git-upload-pack' | 'git-receive-pack',
  who: TestUser | null,
): Promise<GitAnswer> {
  const headers: Record<string, string> = who ? { authorization: basicAuth(who.name, who.token) } : {};
  const response = await fetch(`${s.url}/${owner}/${repo}.git/info/refs?service=${service}`, { headers });
  const text = await response.text();
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    challenge: response.headers.get('www-authenticate'),
    text,
  };
}
