// Lint for correctness, not taste: typescript-eslint's recommended rules plus a
// few that catch real bugs in async server code.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The layers of docs/architecture.md, enforced: imports run downward only
// (http → services → models → modules), only the HTTP layer knows Fastify or
// Connect, and a migration is frozen code that imports nothing but kysely and
// its dialect helper (importing a model would change old migrations when the
// model changes). test/lint-layers.test.ts proves each rule bites.
const layer = (folders, files = []) => ({
  regex: `(^|/)(${folders.join('|')})/${files.length ? `|(^|/)(${files.join('|')})\\.ts$` : ''}`,
  message: 'imports run downward only: http → services → models → modules (docs/architecture.md)',
});
const ENTRY_POINTS = ['deps', 'app', 'main', 'config'];
const WEB_FRAMEWORKS = {
  regex: '^(fastify|@fastify/|@connectrpc/connect-fastify|@connectrpc/connect-node)',
  message: 'only src/http, app.ts and main.ts know Fastify and the Connect server',
};
// src/runner is a client of the runner protocol, not part of the server: it may use modules and
// the generated protocol code, nothing of the server's layers; and no layer imports it (only
// the CLI and src/embedded-runner.ts start it). `gen/runner/` is the generated protocol, not this folder.
const RUNNER_FOLDER = {
  regex: '(^|/)(?<!gen/)runner/',
  message: 'src/runner is a protocol client: only the CLI and src/embedded-runner.ts start it (docs/architecture.md)',
};
const layerRules = [
  {
    files: ['src/runner/**/*.ts'],
    patterns: [
      {
        ...layer(['http', 'services', 'models', 'cli', 'migrations', 'api-types'], ENTRY_POINTS),
        message: 'src/runner imports only src/modules and src/gen: it talks to the server over /api/actions',
      },
      {
        regex: '^(fastify|@fastify/|@connectrpc/connect-fastify|kysely|pg|better-sqlite3)$',
        message: 'src/runner is a client: no web server, no database',
      },
    ],
  },
  {
    files: ['src/modules/**/*.ts', 'src/api-types/**/*.ts'],
    patterns: [
      layer(['http', 'services', 'models', 'cli', 'migrations'], ENTRY_POINTS),
      WEB_FRAMEWORKS,
      RUNNER_FOLDER,
      { regex: '^(kysely|pg|better-sqlite3)$', message: 'modules use no database' },
    ],
  },
  {
    files: ['src/models/**/*.ts'],
    patterns: [layer(['http', 'services', 'cli'], ['deps', 'app', 'main']), WEB_FRAMEWORKS, RUNNER_FOLDER],
  },
  {
    files: ['src/services/**/*.ts'],
    patterns: [layer(['http', 'cli'], ['deps', 'app', 'main']), WEB_FRAMEWORKS, RUNNER_FOLDER],
  },
  { files: ['src/http/**/*.ts'], patterns: [RUNNER_FOLDER] },
  {
    files: ['src/migrations/0*.ts', 'src/migrations/dialect.ts'],
    patterns: [
      {
        regex: '^(?!kysely$|\\./dialect\\.ts$)',
        message: 'a migration imports only kysely and ./dialect.ts (never models: a landed migration must not change)',
      },
    ],
  },
].map(({ files, patterns }) => ({ files, rules: { 'no-restricted-imports': ['error', { patterns }] } }));

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', 'dist/**', 'src/gen/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
        fetch: 'readonly',
        AbortController: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
        structuredClone: 'readonly',
        queueMicrotask: 'readonly',
        setImmediate: 'readonly',
        btoa: 'readonly',
        performance: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  // The web console's scripts run in the browser (src/http/web/assets/).
  {
    files: ['src/http/web/assets/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: { document: 'readonly', window: 'readonly', navigator: 'readonly' },
    },
  },
  ...layerRules,
);
