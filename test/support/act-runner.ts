// Gitea's act_runner as forgejo-runner-v12.ts emulates it: the same
// connect-go client, poller and reporter (both descend from act_runner), with
// act_runner's differences (gitea.com/gitea/act_runner internal/pkg/client,
// internal/pkg/report):
// - newest builds declare `capabilities` (Register #8, Declare #3), e.g.
//   "cancelling";
// - no x-runner-request-key: a FetchTask whose answer is lost is not retried
//   with a key (Gitea ignores it);
// - the job's outputs reach the reporter (SetOutputs) before its result, so an
//   UpdateTask carries them with RESULT_UNSPECIFIED;
// - Close ends the log with an empty row (its closing words are empty for a
//   job that ended normally), sent with no_more;
// - only RESULT_CANCELLED from the server stops a job.
import { EmulatedRunner } from './forgejo-runner-v12.ts';
import type { EmulatedRunnerOptions, Flavour } from './forgejo-runner-v12.ts';
import { Result } from './runner-wire.ts';

export const ACT_RUNNER: Flavour = {
  name: 'act_runner',
  userAgent: 'gitea-runner/v0.3.0',
  capabilities: ['cancelling'],
  sendsRequestKey: false,
  outputsBeforeResult: true,
  closingRow: () => '',
  stopsOn: [Result.cancelled],
};

export function createActRunner(options: EmulatedRunnerOptions): EmulatedRunner {
  return new EmulatedRunner({ version: 'v0.3.0', ...options }, ACT_RUNNER);
}
