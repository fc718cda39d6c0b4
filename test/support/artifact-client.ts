// Runs the real @actions/artifact client (the library inside
// actions/upload-artifact@v4 and download-artifact@v4) in a child process, as
// a job step would: it reads ACTIONS_RUNTIME_TOKEN and ACTIONS_RESULTS_URL
// from its environment, so each call gets a process of its own with the env
// a runner sets, and the test process's env is never touched.
//
// As a script: `node --import tsx test/support/artifact-client.ts '<json command>'`
// prints `::gantry-result::<json>` on its last stdout line (or fails with exit 1).
import { answerAsStepChild, runStepChild } from './step-child.ts';
import type { ChildOutcome } from './step-child.ts';

export type ArtifactCommand =
  | { op: 'upload'; name: string; files: string[]; root: string; retentionDays?: number; compressionLevel?: number }
  | { op: 'list' }
  | { op: 'download'; id: number; path: string; expectedHash?: string }
  | { op: 'delete'; name: string };

export interface ArtifactClientEnv {
  runtimeToken: string;
  /** The instance URL (the runner sets ACTIONS_RESULTS_URL to it). */
  resultsUrl: string;
  workspace: string;
}

export type { ChildOutcome } from './step-child.ts';

/** Runs one command in a child; resolves with its exit code and result (never rejects on a failed command). */
export function runArtifactClient(env: ArtifactClientEnv, command: ArtifactCommand): Promise<ChildOutcome> {
  return runStepChild(import.meta.url, command, {
    ACTIONS_RUNTIME_TOKEN: env.runtimeToken,
    ACTIONS_RESULTS_URL: env.resultsUrl,
    GITHUB_WORKSPACE: env.workspace,
    // No GITHUB_SERVER_URL: the library refuses to run when it names a host other than github.com
    // (its GHES check); act-based runners leave it at https://github.com for the same reason.
    // Failures answer at once: the client's retries (with backoff) would only slow a test down.
    ACTIONS_ARTIFACT_UPLOAD_CONCURRENCY: '4',
  });
}

async function run(command: ArtifactCommand): Promise<unknown> {
  const { DefaultArtifactClient } = await import('@actions/artifact');
  const client = new DefaultArtifactClient();
  let result: unknown;
  switch (command.op) {
    case 'upload':
      result = await client.uploadArtifact(command.name, command.files, command.root, {
        ...(command.retentionDays === undefined ? {} : { retentionDays: command.retentionDays }),
        ...(command.compressionLevel === undefined ? {} : { compressionLevel: command.compressionLevel }),
      });
      break;
    case 'list':
      result = await client.listArtifacts();
      break;
    case 'download':
      result = await client.downloadArtifact(command.id, {
        path: command.path,
        ...(command.expectedHash === undefined ? {} : { expectedHash: command.expectedHash }),
      });
      break;
    case 'delete':
      result = await client.deleteArtifact(command.name);
      break;
  }
  return result;
}

answerAsStepChild(import.meta.url, run);
