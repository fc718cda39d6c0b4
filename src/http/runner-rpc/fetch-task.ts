// FetchTask's translation between the protocol and the runner protocol
// service, shared by the Connect handler (routes.ts) and the direct path
// that serves most of an idle fleet's calls (fetch-task-direct.ts).
import type { FetchTaskRequest, FetchTaskResponse } from '../../gen/runner/v1/messages_pb.ts';
import type { Runner } from '../../models/runners.ts';
import type {
  FetchTasksRequest,
  FetchTasksResult,
  RunnerProtocolService,
} from '../../services/actions/runner-protocol.ts';
import type { EndSignal } from '../../services/actions/tasks-version-watch.ts';
import { toNumber, toProtoTask } from './mapping.ts';

/** Answer a little before the caller's Connect deadline rather than after it. */
const DEADLINE_MARGIN_MS = 500;

/**
 * How long a FetchTask may wait for work: the client's deadline less a margin
 * for claiming and answering (at least DEADLINE_MARGIN_MS, a tenth of the
 * deadline when that is more), so a busy server still answers "no task"
 * before the runner gives up on the call, and an idle runner is held most of
 * the time it allows (fewer polls per idle runner).
 */
export function maxWaitOf(timeoutMs: number | undefined): number | undefined {
  return timeoutMs === undefined
    ? undefined
    : Math.max(0, timeoutMs - Math.max(DEADLINE_MARGIN_MS, Math.ceil(timeoutMs / 10)));
}

/** Forgejo's FetchTask answers an unusable key like no key; only a well-formed one is used. */
export function usableRequestKey(header: string | null | undefined): string | undefined {
  const key = header?.trim();
  return key === undefined || key === '' || key.length > 64 ? undefined : key;
}

export interface FetchTaskCall {
  timeoutMs: number | undefined;
  requestKey: string | undefined;
  signal: EndSignal;
}

/** The service's request for a FetchTask call. */
export function fetchTasksRequestOf(req: FetchTaskRequest, call: FetchTaskCall): FetchTasksRequest {
  return {
    tasksVersion: toNumber(req.tasksVersion),
    ...(req.taskCapacity !== undefined ? { capacity: toNumber(req.taskCapacity) } : {}),
    requestKey: call.requestKey,
    signal: call.signal,
    maxWaitMs: maxWaitOf(call.timeoutMs),
  };
}

/** FetchTask's answer to what the service found. */
export function fetchTaskResponseOf(
  result: FetchTasksResult,
): Pick<FetchTaskResponse, 'task' | 'additionalTasks' | 'tasksVersion'> {
  const [first, ...rest] = result.tasks.map(toProtoTask);
  return { task: first, additionalTasks: rest, tasksVersion: BigInt(result.tasksVersion) };
}

export async function fetchTask(
  protocol: RunnerProtocolService,
  runner: Runner,
  req: FetchTaskRequest,
  call: FetchTaskCall,
): Promise<Pick<FetchTaskResponse, 'task' | 'additionalTasks' | 'tasksVersion'>> {
  return fetchTaskResponseOf(await protocol.fetchTasks(runner, fetchTasksRequestOf(req, call)));
}
