// Domain errors as Connect errors: one mapping for every runner RPC, as the
// error handler does for the REST API (house style: AppError kinds → codes).
import { Code, ConnectError } from '@connectrpc/connect';
import type { FastifyBaseLogger } from 'fastify';
import { AppError } from '../../modules/errors.ts';
import type { ErrorKind } from '../../modules/errors.ts';
import { RequestKeyBusyError } from '../../services/actions/runner-protocol.ts';

const CODE_OF_KIND: Readonly<Record<ErrorKind, Code>> = {
  invalid: Code.InvalidArgument,
  unauthorized: Code.Unauthenticated,
  forbidden: Code.PermissionDenied,
  not_found: Code.NotFound,
  conflict: Code.AlreadyExists,
  too_large: Code.ResourceExhausted,
  unprocessable: Code.InvalidArgument,
  locked: Code.FailedPrecondition,
  too_many_requests: Code.ResourceExhausted,
};

/** Connect's wire names (`already_exists`) and their codes, for errors that name a code directly. */
const CODE_OF_NAME: ReadonlyMap<string, Code> = new Map(
  Object.entries(Code)
    .filter((entry): entry is [string, Code] => typeof entry[1] === 'number')
    .map(([name, code]) => [
      name.replace(/[A-Z]/g, (c, i: number) => (i === 0 ? c.toLowerCase() : `_${c.toLowerCase()}`)),
      code,
    ]),
);

function namedCode(error: unknown): Code | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown; connectCode?: unknown }).connectCode ?? (error as { code?: unknown }).code;
  if (typeof code === 'string') return CODE_OF_NAME.get(code);
  return undefined;
}

/**
 * The Connect error a runner sees. Messages of domain errors are safe to show;
 * anything else is logged and answered as `internal` without detail.
 */
export function toConnectError(error: unknown, log: FastifyBaseLogger, rpc: string): ConnectError {
  if (error instanceof ConnectError) return error;
  if (error instanceof AppError) return new ConnectError(error.message, CODE_OF_KIND[error.kind]);
  // Two calls with one request key at once: a conflict the runner resolves by retrying
  // (it keeps the key until a call succeeds), not a server fault. aborted is 409, internal was 500.
  if (error instanceof RequestKeyBusyError) return new ConnectError(error.message, Code.Aborted);
  const named = namedCode(error);
  if (named !== undefined && error instanceof Error) return new ConnectError(error.message, named);
  log.error({ err: error, rpc }, 'runner RPC failed');
  return new ConnectError('internal error', Code.Internal);
}
