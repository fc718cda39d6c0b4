// Runner authentication for every RPC but Ping and Register (Forgejo:
// routers/api/actions/runner/interceptor.go): x-runner-uuid and
// x-runner-token name a registered runner, or the call fails with
// `unauthenticated` "unregistered runner". request-gate.ts checks them from
// the headers alone, before a byte of the body is read, and hands the runner
// to the handlers through a context value. Register is authenticated by the
// registration token inside its (small, capped) body; Ping by nothing.
import { Code, ConnectError, createContextKey } from '@connectrpc/connect';
import type { ContextValues, HandlerContext } from '@connectrpc/connect';
import type { DescMethod } from '@bufbuild/protobuf';
import type { Runner } from '../../models/runners.ts';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';

export const UUID_HEADER = 'x-runner-uuid';
export const TOKEN_HEADER = 'x-runner-token';
export const REQUEST_KEY_HEADER = 'x-runner-request-key';

const runnerKey = createContextKey<Runner | null>(null, { description: 'the authenticated runner' });

const PUBLIC_METHODS: ReadonlySet<string> = new Set(['ping.v1.PingService/Ping', 'runner.v1.RunnerService/Register']);
/** Task reports make a runner `active` besides `online`. */
const REPORT_METHODS: ReadonlySet<string> = new Set(['UpdateTask', 'UpdateLog']);

/** Ping and Register: callable without runner credentials. */
export function isPublicMethod(method: DescMethod): boolean {
  return PUBLIC_METHODS.has(`${method.parent.typeName}/${method.name}`);
}

/** The error every missing, unknown or wrong runner credential gets (one message: no hint which part was wrong). */
export function unregisteredRunner(): ConnectError {
  return new ConnectError('unregistered runner', Code.Unauthenticated);
}

/** The runner the headers name, or null; marks it online (and active for task reports). */
export async function authenticateRunner(
  protocol: RunnerProtocolService,
  method: DescMethod,
  header: Headers,
): Promise<Runner | null> {
  const uuid = header.get(UUID_HEADER) ?? '';
  const token = header.get(TOKEN_HEADER) ?? '';
  return protocol.authenticate(uuid, token, REPORT_METHODS.has(method.name));
}

/** Records the authenticated runner for the handler (runnerOf). */
export function setRunner(values: ContextValues, runner: Runner): void {
  values.set(runnerKey, runner);
}

/** The runner the gate authenticated; throws if the route was left unprotected by mistake. */
export function runnerOf(ctx: HandlerContext): Runner {
  const runner = ctx.values.get(runnerKey);
  if (runner === null) throw unregisteredRunner();
  return runner;
}
