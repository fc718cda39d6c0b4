// A runner as the tests drive it: a Connect client over real HTTP, built from
// the same generated code as the server, speaking the binary codec with gzip
// like act_runner (or JSON when asked), sending the runner headers once
// registered.
import { createClient } from '@connectrpc/connect';
import type { Client, Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { parse as parseYaml } from 'yaml';
import { PingService } from '../../src/gen/ping/v1/services_pb.ts';
import { RunnerService } from '../../src/gen/runner/v1/services_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';

export interface RunnerCredentials {
  id: number;
  uuid: string;
  token: string;
}

export interface RunnerClientOptions {
  /** JSON codec instead of binary protobuf. */
  json?: boolean;
  credentials?: RunnerCredentials;
}

export interface RunnerClient {
  ping: Client<typeof PingService>;
  runner: Client<typeof RunnerService>;
  credentials: RunnerCredentials | null;
  /** Sends x-runner-request-key on the next calls (null: stop sending it). */
  setRequestKey(key: string | null): void;
}

export function createRunnerClient(serverUrl: string, options: RunnerClientOptions = {}): RunnerClient {
  let requestKey: string | null = null;
  const state: { credentials: RunnerCredentials | null } = { credentials: options.credentials ?? null };
  const headers: Interceptor = (next) => async (req) => {
    if (state.credentials !== null) {
      req.header.set('x-runner-uuid', state.credentials.uuid);
      req.header.set('x-runner-token', state.credentials.token);
    }
    if (requestKey !== null) req.header.set('x-runner-request-key', requestKey);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: `${serverUrl}/api/actions`,
    httpVersion: '1.1',
    useBinaryFormat: options.json !== true,
    interceptors: [headers],
  });
  return {
    ping: createClient(PingService, transport),
    runner: createClient(RunnerService, transport),
    get credentials() {
      return state.credentials;
    },
    set credentials(value) {
      state.credentials = value;
    },
    setRequestKey(key) {
      requestKey = key;
    },
  };
}

export interface RegisterOptions {
  name?: string;
  labels?: string[];
  version?: string;
  ephemeral?: boolean;
  json?: boolean;
}

let registered = 0;

/** Registers a runner with `registrationToken` and returns a client that authenticates as it. */
export async function registerRunner(
  serverUrl: string,
  registrationToken: string,
  options: RegisterOptions = {},
): Promise<RunnerClient> {
  registered += 1;
  const client = createRunnerClient(serverUrl, { json: options.json });
  const res = await client.runner.register({
    name: options.name ?? `runner-${registered}`,
    token: registrationToken,
    version: options.version ?? 'v12.0.0-test',
    labels: options.labels ?? ['ubuntu-latest'],
    ephemeral: options.ephemeral ?? false,
  });
  const runner = res.runner;
  if (runner === undefined) throw new Error('Register answered without a runner');
  client.credentials = { id: Number(runner.id), uuid: runner.uuid, token: runner.token };
  return client;
}

/** A task as plain values: the workflow text, the context as JSON. */
export interface DecodedTask {
  id: number;
  workflowPayload: string;
  workflow: { jobs: Record<string, { steps?: unknown[] } & Record<string, unknown>> } & Record<string, unknown>;
  context: Record<string, unknown>;
  secrets: Record<string, string>;
  vars: Record<string, string>;
  needs: Record<string, { outputs: Record<string, string>; result: number }>;
}

export function decodeTask(task: Task): DecodedTask {
  const workflowPayload = new TextDecoder().decode(task.workflowPayload ?? new Uint8Array());
  const needs: DecodedTask['needs'] = {};
  for (const [jobId, need] of Object.entries(task.needs))
    needs[jobId] = { outputs: { ...need.outputs }, result: need.result };
  return {
    id: Number(task.id),
    workflowPayload,
    workflow: parseYaml(workflowPayload) as DecodedTask['workflow'],
    context: (task.context ?? {}) as Record<string, unknown>,
    secrets: { ...task.secrets },
    vars: { ...task.vars },
    needs,
  };
}
