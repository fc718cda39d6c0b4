// Every scenario `npm run bench` runs, in order. To add one: write
// bench/scenarios/<name>.ts exporting a Scenario, and list it here.
import type { Scenario } from '../lib/scenario.ts';
import { actionsRuns } from './actions-runs.ts';
import { artifacts } from './artifacts.ts';
import { artifactsV3 } from './artifacts-v3.ts';
import { authenticatedGetUser } from './authenticated-get-user.ts';
import { idleFleet } from './idle-fleet.ts';
import { idleRss } from './idle-rss.ts';
import { jobLogDownload } from './job-log-download.ts';
import { repoActionsData } from './repo-actions-data.ts';
import { runCancel } from './run-cancel.ts';
import { runners } from './runners.ts';
import { runnerThroughput } from './runner-throughput.ts';
import { scaleOut } from './scale-out.ts';
import { webConsole } from './web-console.ts';
import { schedules } from './schedules.ts';
import { webhooks } from './webhooks.ts';

export const SCENARIOS: readonly Scenario[] = [
  authenticatedGetUser,
  repoActionsData,
  actionsRuns,
  runners,
  idleFleet,
  runCancel,
  schedules,
  runnerThroughput,
  webhooks,
  webConsole,
  jobLogDownload,
  artifacts,
  artifactsV3,
  scaleOut,
  idleRss,
];
