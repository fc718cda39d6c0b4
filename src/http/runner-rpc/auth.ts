// Runner authentication for every RPC but Ping and Register (Forgejo:
// routers/api/actions/runner/interceptor.go): x-runner-uuid and
// x-runner-token name a registered runner, or the call fails with
// `unauthenticated` "unregistered runner". The runner is handed to the
// handlers through a context value.
import { Code, ConnectError, createContextKey } from '@connectrpc/connect';
import type { HandlerContext, Interceptor } from '@connectrpc/connect';
import type { Runner } from '../../models/runners.ts';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';

export const UUID_HEADER = 'x-runner-uuid';
export const TOKEN_HEADER = 'x-runner-token';
export const REQUEST_KEY_HEADER = 'x-runner-request-key';

const runnerKey = createContextKey<Runner | null>(null, { description: 'the authenticated runner' });

const PUBLIC_METHODS: ReadonlySet<string> = new Set(['ping.v1.PingService/Ping', 'runner.v1.RunnerService/Register']);
/** Task reports make a runner `active` besides `online`. */
const REPORT_METHODS: ReadonlySet<string> = new Set(['UpdateTask', 'UpdateLog']);

export function runnerAuthInterceptor(protocol: RunnerProtocolService): Interceptor {
  return (next) => async (req) => {
    if (PUBLIC_METHODS.has(`${req.service.typeName}/${req.method.name}`)) return next(req);
    const uuid = req.header.get(UUID_HEADER) ?? '';
    const token = req.header.get(TOKEN_HEADER) ?? '';
    const runner = await protocol.authenticate(uuid, token, REPORT_METHODS.has(req.method.name));
    if (runner === null) throw new ConnectError('unregistered runner', Code.Unauthenticated);
    req.contextValues.set(runnerKey, runner);
    return next(req);
  };
}

/** The runner the interceptor authenticated; throws if the route was left unprotected by mistake. */
export function runnerOf(ctx: HandlerContext): Runner {
  const runner = ctx.values.get(runnerKey);
  if (runner === null) throw new ConnectError('unregistered runner', Code.Unauthenticated);
  return runner;
}
