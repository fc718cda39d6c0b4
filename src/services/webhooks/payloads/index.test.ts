// Every typed hook × every event the outboxes store: which are sent and which
// skipped (and why), that bodies are JSON and nothing throws on empty or
// odd payloads; and prepareRequest's headers, signatures and records.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import type { HookTask } from '../../../models/hook-tasks.ts';
import type { WebhookRecord } from '../../../models/webhooks.ts';
import { prepareRequest } from '../prepare-request.ts';
import type { HookSecrets } from '../prepare-request.ts';
import { converterFor } from './index.ts';
import { EVENTS, HOOK_URL, input, pushPayload, UUID } from './test-fixtures.ts';

const CHAT_TYPES = ['slack', 'discord', 'msteams', 'telegram', 'dingtalk', 'feishu', 'wechatwork', 'matrix'];
const ALL_TYPES = [...CHAT_TYPES, 'packagist', 'sourcehut_builds'];
const MANIFEST = { text: 'image: alpine/edge\ntasks:\n  - build: make\n' };

describe('every type × every event', () => {
  test('chat types and packagist send every event; sourcehut_builds only push and create', () => {
    for (const type of ALL_TYPES) {
      const convert = converterFor(type);
      assert.ok(convert, type);
      for (const [eventType, payload] of EVENTS) {
        const converted = convert(input(eventType, payload, { manifest_path: '.build.yml' }, { manifest: MANIFEST }));
        const sent = type !== 'sourcehut_builds' || eventType === 'push' || eventType === 'create';
        assert.equal(converted.kind, sent ? 'request' : 'skip', `${type} ${eventType}`);
        if (converted.kind === 'request')
          assert.doesNotThrow(() => JSON.parse(converted.request.body), `${type} ${eventType}`);
        else assert.equal(converted.reason, `sourcehut_builds hooks do not carry ${eventType} events`);
      }
    }
  });

  test('forgejo/gitea/gogs and unknown types have no converter', () => {
    for (const type of ['forgejo', 'gitea', 'gogs', 'nope', 'toString', '__proto__'])
      assert.equal(converterFor(type), null, type);
  });

  test('a push without commits is skipped by every typed hook, as Forgejo never queues it for them', () => {
    for (const type of ALL_TYPES) {
      const converted = converterFor(type)?.(
        input('push', pushPayload(0), { manifest_path: '.build.yml' }, { manifest: MANIFEST }),
      );
      assert.deepEqual(
        converted,
        { kind: 'skip', reason: `${type} hooks are not sent pushes without new commits (as in Forgejo)` },
        type,
      );
    }
  });

  test('events no type renders (issues, ping) are skipped with the reason', () => {
    for (const type of [...CHAT_TYPES, 'sourcehut_builds']) {
      for (const eventType of ['issues', 'ping']) {
        assert.deepEqual(converterFor(type)?.(input(eventType, { action: 'opened' })), {
          kind: 'skip',
          reason: `${type} hooks do not carry ${eventType} events`,
        });
      }
    }
  });

  test('empty and mistyped payloads never throw: they render with empty values or are skipped', () => {
    const odd = [{}, { repository: 'x', commits: [null, 3, 'c'], run: [], workflow_run: 7, sender: null }];
    for (const type of ALL_TYPES) {
      for (const [eventType] of EVENTS) {
        for (const payload of odd) {
          const converted = converterFor(type)?.(input(eventType, payload, { message_type: 'x', color: 5 }));
          assert.ok(converted, `${type} ${eventType}`);
          if (converted.kind === 'request') JSON.parse(converted.request.body);
        }
      }
    }
  });
});

function hook(type: string, overrides: Partial<WebhookRecord> = {}): WebhookRecord {
  return {
    id: 5,
    ownerId: 3,
    repoId: 0,
    type,
    url: HOOK_URL,
    httpMethod: 'POST',
    contentType: 'form',
    secretEncrypted: 's',
    authorizationHeaderEncrypted: 'a',
    events: ['push'],
    branchFilter: '',
    meta: null,
    isActive: true,
    isSystemWebhook: false,
    createdUnix: 0,
    updatedUnix: 0,
    ...overrides,
  };
}

function task(eventType: string, payload: unknown): HookTask {
  return {
    id: 9,
    hook_id: 5,
    uuid: UUID,
    event_type: eventType,
    payload_content: typeof payload === 'string' ? payload : JSON.stringify(payload),
  } as HookTask;
}

const secrets: HookSecrets = { secretOf: () => 'shh', authorizationHeaderOf: () => 'Bearer tok-123' };

describe('prepareRequest for typed hooks', () => {
  test('chat types: JSON whatever the content type, Forgejo headers signed over the bytes sent, the Authorization header', async () => {
    const prepared = await prepareRequest(hook('slack'), task('push', pushPayload()), secrets, 2);
    assert.equal(prepared.kind, 'send');
    if (prepared.kind !== 'send') return;
    const { request } = prepared;
    assert.equal(request.method, 'POST');
    assert.equal(request.url, HOOK_URL);
    assert.equal(request.headers['content-type'], 'application/json');
    const digest = createHmac('sha256', 'shh').update(Buffer.from(request.body, 'utf8')).digest('hex');
    assert.equal(request.headers['x-forgejo-signature'], digest);
    assert.equal(request.headers['x-hub-signature-256'], `sha256=${digest}`);
    assert.equal(request.headers['x-forgejo-event'], 'push');
    assert.equal(request.headers['x-github-delivery'], UUID);
    assert.equal(request.headers['x-gantry-delivery-attempt'], '2');
    assert.equal(request.headers.authorization, 'Bearer tok-123');
    assert.equal(JSON.parse(request.body).text.startsWith('[acme/app:'), true);
  });

  test('matrix, packagist, sourcehut_builds: no Forgejo headers (Forgejo adds none), the Authorization header still', async () => {
    const reads: string[] = [];
    const withFiles: HookSecrets = {
      ...secrets,
      readRepositoryFile: async (owner, repo, commit, path) => (
        reads.push(`${owner}/${repo}@${commit}:${path}`),
        MANIFEST.text
      ),
    };
    for (const type of ['matrix', 'packagist', 'sourcehut_builds']) {
      const prepared = await prepareRequest(
        hook(type, { meta: { manifest_path: '.build.yml' } }),
        task('push', pushPayload()),
        withFiles,
        1,
      );
      assert.equal(prepared.kind, 'send', type);
      if (prepared.kind !== 'send') continue;
      assert.equal(prepared.request.headers['x-forgejo-signature'], undefined, type);
      assert.equal(prepared.request.headers.authorization, 'Bearer tok-123', type);
      assert.equal(prepared.request.method, type === 'matrix' ? 'PUT' : 'POST');
    }
    assert.deepEqual(reads, ['acme/app@2222222222222222222222222222222222222222:.build.yml']);
  });

  test('what is not sent is a permanent record saying why', async () => {
    assert.deepEqual(
      await prepareRequest(
        hook('sourcehut_builds', { meta: { manifest_path: '.build.yml' } }),
        task('delete', {}),
        secrets,
        1,
      ),
      {
        kind: 'unsendable',
        error: 'not sent: sourcehut_builds hooks do not carry delete events',
        permanent: true,
      },
    );
    assert.deepEqual(
      await prepareRequest(
        hook('sourcehut_builds', { meta: { manifest_path: '.build.yml' } }),
        task('push', pushPayload()),
        secrets,
        1,
      ),
      {
        kind: 'unsendable',
        error:
          'not sent: acme/app:refs/heads/main could not open manifest ".build.yml" at 2222222222222222222222222222222222222222',
        permanent: true,
      },
    );
    assert.deepEqual(await prepareRequest(hook('discord'), task('push', '{oops'), secrets, 1), {
      kind: 'unsendable',
      error: 'not sent: the stored push payload is not valid JSON',
      permanent: true,
    });
  });

  test('a manifest that cannot be read just now, or secrets no key decrypts, may be retried', async () => {
    const failing: HookSecrets = {
      ...secrets,
      readRepositoryFile: async () => Promise.reject(new Error('git cat-file died')),
    };
    const prepared = await prepareRequest(
      hook('sourcehut_builds', { meta: { manifest_path: '.build.yml' } }),
      task('push', pushPayload()),
      failing,
      1,
    );
    assert.deepEqual(prepared, {
      kind: 'unsendable',
      error: 'could not read the build manifest: git cat-file died',
      permanent: false,
    });
    const locked: HookSecrets = {
      secretOf: () => {
        throw new Error('no key decrypts it');
      },
      authorizationHeaderOf: () => '',
    };
    assert.deepEqual(await prepareRequest(hook('telegram'), task('push', pushPayload()), locked, 1), {
      kind: 'unsendable',
      error: 'could not prepare the request: no key decrypts it',
      permanent: false,
    });
  });
});
