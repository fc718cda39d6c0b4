// The runner's side of the Connect protocol: a client of the instance's
// /api/actions endpoint built from the generated services, speaking the binary
// codec over HTTP/1.1 and accepting gzip answers, as forgejo-runner does
// (internal/pkg/client/http.go), with the runner headers on every call once
// registered (internal/pkg/client/header.go).
import { createClient } from '@connectrpc/connect';
import type { Client, Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { PingService } from '../gen/ping/v1/services_pb.ts';
import { RunnerService } from '../gen/runner/v1/services_pb.ts';

export const RUNNER_VERSION = 'gantry-runner-0.1.0';

export interface RunnerConnection {
  ping: Client<typeof PingService>;
  runner: Client<typeof RunnerService>;
}

export interface RunnerIdentity {
  uuid: string;
  token: string;
}

/** `address` is the instance's root URL; `identity` is absent only for Ping and Register. */
export function connectToInstance(address: string, identity?: RunnerIdentity): RunnerConnection {
  const headers: Interceptor = (next) => async (req) => {
    if (identity !== undefined) {
      req.header.set('x-runner-uuid', identity.uuid);
      req.header.set('x-runner-token', identity.token);
    }
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: `${address.replace(/\/+$/, '')}/api/actions`,
    httpVersion: '1.1',
    useBinaryFormat: true,
    interceptors: [headers],
  });
  return { ping: createClient(PingService, transport), runner: createClient(RunnerService, transport) };
}
