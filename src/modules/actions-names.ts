// Names and values of Actions secrets and variables, as Forgejo checks them
// (services/secrets/validation.go, services/actions/variables.go,
// modules/util.ReserveLineBreakForTextarea). Pure functions: no I/O.

/** Longest accepted name: Forgejo's column is VARCHAR(255); longer ones are refused up front. */
export const MAX_NAME_BYTES = 255;

/**
 * Largest secret data or variable value, in UTF-8 bytes after line-break
 * normalisation. Forgejo has no limit; Gantry's is generous (64 KiB, Gitea's
 * and GitHub's 48–64 KiB range) and answered 422 rather than a database error.
 */
export const MAX_VALUE_BYTES = 65_536;

export const INVALID_NAME_MESSAGE = 'invalid secret name';
export const CI_NAME_MESSAGE = 'env name cannot be ci';

const NAME_PATTERN = /^[A-Z_][A-Z0-9_]*$/i;
const FORBIDDEN_PREFIX = /^(FORGEJO_|GITEA_|GITHUB_|[0-9])/i;
const HAS_LOWER_ASCII = /[a-z]/;

export type NameProblem = typeof INVALID_NAME_MESSAGE | typeof CI_NAME_MESSAGE;

/** Secret names: letters, digits, `_`; not starting with a digit or a reserved prefix. `CI` is allowed. */
export function secretNameProblem(name: string): NameProblem | null {
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) return INVALID_NAME_MESSAGE;
  if (!NAME_PATTERN.test(name) || FORBIDDEN_PREFIX.test(name)) return INVALID_NAME_MESSAGE;
  return null;
}

/** Variable names: the secret rules, and `CI` (any case) is reserved. */
export function variableNameProblem(name: string): NameProblem | null {
  const problem = secretNameProblem(name);
  if (problem) return problem;
  return normalizeName(name) === 'CI' ? CI_NAME_MESSAGE : null;
}

/**
 * Names are stored and compared upper-case, so lookups are case-insensitive.
 * Only ASCII letters change: every storable name is ASCII, and full Unicode
 * upper-casing would let an invalid name such as `ß` look up `SS`.
 */
export function normalizeName(name: string): string {
  // A name already upper-case (as clients mostly send them) is returned as is:
  // the replace below calls back per run of letters even when none matches.
  if (!HAS_LOWER_ASCII.test(name)) return name;
  return name.replace(/[a-z]+/g, (letters) => letters.toUpperCase());
}

/** Only CRLF becomes LF (what a browser textarea sends); nothing is trimmed, a lone CR stays. */
export function normalizeLineBreaks(value: string): string {
  return value.replace(/\r\n/g, '\n');
}

/** True when a (normalised) value is over the size limit. */
export function valueTooLarge(value: string): boolean {
  return Buffer.byteLength(value, 'utf8') > MAX_VALUE_BYTES;
}
