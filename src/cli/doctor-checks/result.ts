// What every doctor check reports, and how one is run with a deadline.
// A check answers one question and gives one line: what it found and, when
// something is off, what the operator should do about it.

/** `skip`: the check could not run because something it needs failed (reported on its own line). */
export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  check: string;
  status: CheckStatus;
  /** What the check found, in a sentence an operator understands. */
  found: string;
  /** What to do; absent when there is nothing to do. */
  fix?: string;
}

export type Finding = Omit<CheckResult, 'check'>;

export interface Check<Context> {
  name: string;
  /** Status and advice when the check does not finish in time. */
  onTimeout: { status: 'warn' | 'fail'; fix: string };
  run(ctx: Context): Promise<Finding>;
}

export const ok = (found: string): Finding => ({ status: 'ok', found });
export const warn = (found: string, fix: string): Finding => ({ status: 'warn', found, fix });
export const fail = (found: string, fix: string): Finding => ({ status: 'fail', found, fix });
export const skip = (found: string): Finding => ({ status: 'skip', found });

export class CheckTimeoutError extends Error {}

/** Thrown by a check that cannot run because something it needs failed; the message says what. */
export class CheckSkipped extends Error {}

/** Rejects with CheckTimeoutError after `ms`; the work itself is left to finish (or be abandoned) on its own. */
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeoutError(`did not finish within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs one check: a deadline, and any unexpected error becomes a failure line instead of a crash. */
export async function runCheck<Context>(
  check: Check<Context>,
  ctx: Context,
  timeoutMs: number,
): Promise<CheckResult & { timedOut: boolean }> {
  try {
    const finding = await withDeadline(check.run(ctx), timeoutMs);
    return { check: check.name, ...finding, timedOut: false };
  } catch (error) {
    if (error instanceof CheckSkipped) return { check: check.name, ...skip(error.message), timedOut: false };
    if (error instanceof CheckTimeoutError) {
      return {
        check: check.name,
        status: check.onTimeout.status,
        found: error.message,
        fix: check.onTimeout.fix,
        timedOut: true,
      };
    }
    // Not a finding the check knows how to explain (a file system or database error): show it as it is.
    return {
      check: check.name,
      status: 'fail',
      found: `could not check: ${messageOf(error)}`,
      fix: 'fix what the message names, then run doctor again',
      timedOut: false,
    };
  }
}

export function messageOf(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    // AggregateError (e.g. a connection refused on both ::1 and 127.0.0.1) has an empty message.
    if (error.message === '' && error instanceof AggregateError && error.errors.length > 0)
      return messageOf(error.errors[0]);
    return code && !error.message.includes(code) ? `${error.message} (${code})` : error.message;
  }
  return String(error);
}

/** Caches the first call's promise, so checks that need the same thing (the database) share it. */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
}
