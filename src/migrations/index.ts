// The ordered list of migrations. A landed migration is never edited: add a new one.
import type { Migration } from 'kysely';
import * as m0001 from './0001-accounts.ts';
import * as m0002 from './0002-actions-secrets-variables.ts';
import * as m0003 from './0003-actions-runs.ts';
import * as m0004 from './0004-actions-runners.ts';
import * as m0005 from './0005-webhooks.ts';
import * as m0006 from './0006-metrics-indexes.ts';
import * as m0007 from './0007-runner-request-keys.ts';
import * as m0008 from './0008-runner-token-active-unique.ts';
import * as m0009 from './0009-workflow-states.ts';
import * as m0010 from './0010-repo-hook-index.ts';
import * as m0011 from './0011-commit-statuses.ts';
import * as m0012 from './0012-hook-task-time-unit.ts';
import * as m0013 from './0013-action-schedules.ts';
import * as m0014 from './0014-concurrency.ts';
import * as m0015 from './0015-artifacts.ts';
import * as m0016 from './0016-web-sessions.ts';
import * as m0017 from './0017-runner-identity-version.ts';
import * as m0018 from './0018-job-concurrency.ts';
import * as m0019 from './0019-run-job-counts.ts';
import * as m0020 from './0020-repository-guard-version.ts';

export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '0001-accounts': m0001,
  '0002-actions-secrets-variables': m0002,
  '0003-actions-runs': m0003,
  '0004-actions-runners': m0004,
  '0005-webhooks': m0005,
  '0006-metrics-indexes': m0006,
  '0007-runner-request-keys': m0007,
  '0008-runner-token-active-unique': m0008,
  '0009-workflow-states': m0009,
  '0010-repo-hook-index': m0010,
  '0011-commit-statuses': m0011,
  '0012-hook-task-time-unit': m0012,
  '0013-action-schedules': m0013,
  '0014-concurrency': m0014,
  '0015-artifacts': m0015,
  '0016-web-sessions': m0016,
  '0017-runner-identity-version': m0017,
  '0018-job-concurrency': m0018,
  '0019-run-job-counts': m0019,
  '0020-repository-guard-version': m0020,
};
