// Runners of a two-process deployment that poll one process and report
// through the other (the race tests of concurrency groups), and the group
// member's loop those tests share: take a job, check nothing else of the
// group is handed out or claimable, finish it.
import assert from 'node:assert/strict';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { createRunnerClient, decodeTask } from './runner-client.ts';
import type { RunnerClient } from './runner-client.ts';

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface CrossRunner {
  /** Polls `fetchUrl`. */
  fetcher: RunnerClient;
  /** The same runner's credentials, reporting through `reportUrl`. */
  reporter: RunnerClient;
}

/** Registers a runner through `fetchUrl` with one label. */
export async function registerCrossRunner(
  fetchUrl: string,
  reportUrl: string,
  registrationToken: string,
  name: string,
  label: string,
): Promise<CrossRunner> {
  const fetcher = createRunnerClient(fetchUrl);
  const res = await fetcher.runner.register({ name, token: registrationToken, version: 'v12.0.0', labels: [label] });
  assert.ok(res.runner);
  fetcher.credentials = { id: Number(res.runner.id), uuid: res.runner.uuid, token: res.runner.token };
  return { fetcher, reporter: createRunnerClient(reportUrl, { credentials: fetcher.credentials }) };
}

/** `count` runners alternating between the two processes, each reporting through the other. */
export async function registerCrossRunners(
  urls: readonly [string, string],
  registrationToken: string,
  count: number,
  label: string,
): Promise<CrossRunner[]> {
  const runners: CrossRunner[] = [];
  for (let i = 0; i < count; i += 1)
    runners.push(
      await registerCrossRunner(
        urls[i % 2] as string,
        urls[(i + 1) % 2] as string,
        registrationToken,
        `${label}-${i}`,
        label,
      ),
    );
  return runners;
}

/** A task's success as a runner reports it. */
export async function reportSuccess(reporter: RunnerClient, taskId: bigint | number): Promise<Result | undefined> {
  const answer = await reporter.runner.updateTask({
    state: { id: BigInt(taskId), result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), steps: [] },
  });
  return answer.state?.result;
}

export interface GroupWatch {
  /** Run ids in the order their group member reached a runner. */
  order: number[];
  /** What broke "one member at a time". */
  violations: string[];
}

/**
 * One member runner's loop until `done()`: each task it takes must be the only
 * member handed out (`watch.violations` otherwise) and `released()` (the group's
 * members a runner may hold now) at most 1; it holds the task a random moment,
 * then reports success through the other process.
 */
export async function memberLoop(
  runner: CrossRunner,
  watch: GroupWatch,
  inFlight: { count: number },
  released: () => Promise<number>,
  done: () => boolean,
): Promise<void> {
  while (!done()) {
    const res = await runner.fetcher.runner.fetchTask({ tasksVersion: 0n });
    if (res.task === undefined) {
      await sleep(20);
      continue;
    }
    const task = decodeTask(res.task as Task);
    inFlight.count += 1;
    if (inFlight.count > 1) watch.violations.push(`run ${String(task.context.run_id)} handed out while another ran`);
    const count = await released();
    if (count > 1) watch.violations.push(`${count} jobs of the group released at once`);
    watch.order.push(Number(task.context.run_id));
    await sleep(Math.floor(Math.random() * 30));
    // Counted as over before the report: from then on Gantry may hand out the next one.
    inFlight.count -= 1;
    assert.equal(await reportSuccess(runner.reporter, task.id), Result.SUCCESS);
  }
}
