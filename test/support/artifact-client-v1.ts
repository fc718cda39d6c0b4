// Runs the real @actions/artifact 1.x client (the library inside
// actions/upload-artifact@v3 and download-artifact@v3, installed as
// @actions/artifact-v1) in a child process, as a job step would: it reads
// ACTIONS_RUNTIME_URL, ACTIONS_RUNTIME_TOKEN, GITHUB_RUN_ID and
// GITHUB_WORKSPACE from its environment, so each call gets a process of its
// own with the env a runner sets, and the test process's env is never touched.
//
// As a script: `node --import tsx test/support/artifact-client-v1.ts '<json command>'`
// prints `::gantry-result::<json>` on its last stdout line (or fails with exit 1).
import { answerAsStepChild, runStepChild } from './step-child.ts';
import type { ChildOutcome } from './step-child.ts';

export type ArtifactV1Command =
  | { op: 'upload'; name: string; files: string[]; root: string; retentionDays?: number }
  | { op: 'download'; name: string; path: string }
  | { op: 'downloadAll'; path: string };

export interface ArtifactV1Env {
  runtimeToken: string;
  /** The instance URL; ACTIONS_RUNTIME_URL is <instance>/api/actions_pipeline/, as runners set it. */
  instanceUrl: string;
  runId: number;
  workspace: string;
}

export type { ChildOutcome } from './step-child.ts';

/** Runs one command in a child; resolves with its exit code and result (never rejects on a failed command). */
export function runArtifactClientV1(env: ArtifactV1Env, command: ArtifactV1Command): Promise<ChildOutcome> {
  return runStepChild(import.meta.url, command, {
    TMPDIR: env.workspace,
    ACTIONS_RUNTIME_URL: `${env.instanceUrl.replace(/\/$/, '')}/api/actions_pipeline/`,
    ACTIONS_RUNTIME_TOKEN: env.runtimeToken,
    GITHUB_RUN_ID: String(env.runId),
    GITHUB_WORKSPACE: env.workspace,
  });
}

async function run(command: ArtifactV1Command): Promise<unknown> {
  const artifact = await import('@actions/artifact-v1');
  const client = artifact.create();
  let result: unknown;
  switch (command.op) {
    case 'upload':
      result = await client.uploadArtifact(command.name, command.files, command.root, {
        ...(command.retentionDays === undefined ? {} : { retentionDays: command.retentionDays }),
      });
      break;
    case 'download':
      result = await client.downloadArtifact(command.name, command.path);
      break;
    case 'downloadAll':
      result = await client.downloadAllArtifacts(command.path);
      break;
  }
  return result;
}

answerAsStepChild(import.meta.url, run);
