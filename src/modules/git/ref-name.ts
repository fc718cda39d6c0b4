// Branch-name validation without spawning git: it runs on every request that
// names a branch, and it is the first line of defence before a name reaches a
// git command line. Mirrors `git check-ref-format --branch` (refs.c
// check_refname_format on refs/heads/<name>, plus the --branch extras), and is
// deliberately stricter in two places noted below.

/** Forgejo caps branch names (e.g. default_branch) at 100; we count UTF-8 bytes, the stricter reading (git has no limit). */
export const MAX_BRANCH_NAME_BYTES = 100;

// ASCII control characters (incl. NUL and DEL), space, and the characters git
// reserves for revision syntax, refspecs and globs.
// eslint-disable-next-line no-control-regex
const FORBIDDEN_CHARS = /[\x00-\x20\x7f~^:?*[\\]/;

// With the `u` flag a surrogate range only matches unpaired halves.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

export function isValidBranchName(name: string): boolean {
  if (name.length === 0) return false;
  if (Buffer.byteLength(name, 'utf8') > MAX_BRANCH_NAME_BYTES) return false;
  // Lone surrogates cannot be encoded as UTF-8; git would see U+FFFD instead of what we validated.
  if (LONE_SURROGATE.test(name)) return false;
  // --branch: a leading dash would read as an option; HEAD is not a branch.
  if (name.startsWith('-') || name === 'HEAD') return false;
  // Stricter than git, which accepts refs/heads/@: `@` alone means HEAD in
  // revision syntax, so such a branch is a trap for users and tools.
  if (name === '@') return false;
  if (FORBIDDEN_CHARS.test(name)) return false;
  if (name.includes('..') || name.includes('@{')) return false;
  if (name.endsWith('.')) return false;
  // Empty components cover a leading or trailing `/` and `//`.
  for (const component of name.split('/')) {
    if (component.length === 0) return false;
    if (component.startsWith('.')) return false;
    if (component.endsWith('.lock')) return false;
  }
  return true;
}
