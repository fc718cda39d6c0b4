// The layer rules of docs/architecture.md bite: ESLint (with the project's own
// eslint.config.js) rejects an import against the direction of the layers, a
// database or web framework where it does not belong, and a migration that
// imports anything but kysely and its dialect helper — and accepts the
// imports the layers allow.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const eslint = new ESLint({ cwd: repoRoot });

/** The messages of `no-restricted-imports` for `code` as if it were the file at `filePath`. */
async function layerErrors(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${code}\nexport const used = x;\n`, { filePath });
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

const refused: Array<[string, string]> = [
  ['src/services/actions/example.ts', "import { x } from '../../http/guards.ts';"],
  ['src/services/example.ts', "import { x } from '../deps.ts';"],
  ['src/services/example.ts', "import { x } from 'fastify';"],
  ['src/models/example.ts', "import { x } from '../services/permissions.ts';"],
  ['src/models/example.ts', "import { x } from '../http/errors.ts';"],
  ['src/modules/example.ts', "import { x } from '../models/users.ts';"],
  ['src/modules/git/example.ts', "import { x } from '../../config.ts';"],
  ['src/modules/example.ts', "import { x } from 'kysely';"],
  ['src/api-types/example.ts', "import { x } from '../services/convert.ts';"],
  ['src/migrations/0099-example.ts', "import { x } from '../models/users.ts';"],
  ['src/migrations/0099-example.ts', "import { x } from '../modules/names.ts';"],
  ['src/runner/example.ts', "import { x } from '../services/actions/task-payload.ts';"],
  ['src/runner/example.ts', "import { x } from '../models/action-runs.ts';"],
  ['src/runner/example.ts', "import { x } from '../http/errors.ts';"],
  ['src/runner/example.ts', "import { x } from '../config.ts';"],
  ['src/runner/example.ts', "import { x } from 'kysely';"],
  ['src/runner/example.ts', "import { x } from 'fastify';"],
  ['src/services/example.ts', "import { x } from '../runner/daemon.ts';"],
  ['src/modules/example.ts', "import { x } from '../runner/masker.ts';"],
];

const allowed: Array<[string, string]> = [
  ['src/http/api/v1/example.ts', "import { x } from '../../../services/permissions.ts';"],
  ['src/services/example.ts', "import { x } from '../models/users.ts';"],
  ['src/services/example.ts', "import { x } from '../api-types/schemas.ts';"],
  ['src/models/example.ts', "import { x } from '../modules/actions-status.ts';"],
  ['src/modules/example.ts', "import { x } from './names.ts';"],
  ['src/migrations/0099-example.ts', "import { x } from 'kysely';"],
  ['src/migrations/0099-example.ts', "import { x } from './dialect.ts';"],
  ['src/runner/example.ts', "import { x } from '../modules/workflows/expressions.ts';"],
  ['src/runner/example.ts', "import { x } from '../gen/runner/v1/services_pb.ts';"],
  ['src/runner/example.ts', "import { x } from '@connectrpc/connect-node';"],
  ['src/runner/example.ts', "import { x } from './masker.ts';"],
  ['src/http/runner-rpc/example.ts', "import { x } from '../../gen/runner/v1/services_pb.ts';"],
  ['src/cli/example.ts', "import { x } from '../runner/daemon.ts';"],
];

test('imports against the layers fail the lint', async () => {
  for (const [file, code] of refused) {
    assert.notDeepEqual(await layerErrors(file, code), [], `${file}: ${code} must be refused`);
  }
});

test('imports the layers allow pass the lint', async () => {
  for (const [file, code] of allowed) {
    assert.deepEqual(await layerErrors(file, code), [], `${file}: ${code} must be allowed`);
  }
});
