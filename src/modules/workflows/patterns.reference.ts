// REFERENCE ONLY, never imported by the server: the RegExp translation that
// patterns.ts used before issue 13, kept as the oracle for the property tests in
// patterns.test.ts (it backtracks, so only short inputs are fed to it).
// GitHub Actions filter patterns (docs: "Filter pattern cheat sheet"), the glob
// dialect of `branches`, `tags`, `paths` and their `-ignore` twins. Forgejo
// evaluates them with act's `pkg/workflowpattern`; this module keeps its
// syntax and errors so a workflow matches here exactly when it does there:
//
//   *    any run of characters except `/`        **   any run, `/` included
//   **/  zero or more leading directories        \x   x taken literally
//   ?    zero or one of the preceding character  +    one or more of it
//   [..] one character of a set: A-Z a-z 0-9 and ranges within those (`[a-f0-9]`)
//   !p   (first character only) a negative pattern
//
// `?` and `+` are quantifiers, not wildcards: `*.jsx?` matches `page.js` and
// `page.jsx`. At the very start of a pattern there is nothing to repeat, so they
// are literal there, as in act.

/** A pattern act would reject; Forgejo then treats the whole filter as not matching. */
export class InvalidFilterPatternError extends Error {
  constructor(
    readonly pattern: string,
    /** Index in code points into the pattern (after a leading `!`). */
    readonly position: number,
    reason: string,
  ) {
    super(`invalid filter pattern '${pattern}' at position ${position}: ${reason}`);
    this.name = 'InvalidFilterPatternError';
  }
}

/** True when the value is selected by the list: for `branches` "run", for `branches-ignore` "ignored". */
export type FilterMatcher = (value: string) => boolean;

/**
 * Compiles a pattern list once; the returned matcher is cheap and stateless.
 *
 * Patterns are evaluated in sequence and the last one that matches decides:
 * positive selects, negative (`!`) deselects. So a value no positive pattern
 * matches is never selected, and a list of only negations selects nothing (GitHub
 * requires a positive pattern before a `!` one). An empty list selects nothing;
 * callers decide what an empty filter means.
 *
 * Ignore lists use the same reading ("ignored iff the last matching pattern is
 * positive"), which lets `paths-ignore: ['docs/**', '!docs/api.md']` keep
 * `docs/api.md`. act's ignore evaluation differs only when an ignore list holds
 * negations: there a `!p` entry ignores every value that does NOT match p, so
 * such a list ignores nearly everything; we do not copy that.
 *
 * @throws InvalidFilterPatternError when any pattern is malformed.
 */
export function compileFilterPatterns(patterns: readonly string[]): FilterMatcher {
  const compiled = patterns.map((raw) => {
    const negative = raw.startsWith('!');
    return { negative, regex: filterPatternToRegExp(negative ? raw.slice(1) : raw) };
  });
  return (value) => {
    // Scanning from the end, the first match is the last in sequence: it decides.
    for (let i = compiled.length - 1; i >= 0; i--) {
      const entry = compiled[i]!;
      if (entry.regex.test(value)) return !entry.negative;
    }
    return false;
  };
}

/** One pattern (without its `!` prefix) as an anchored regular expression. */
export function filterPatternToRegExp(pattern: string): RegExp {
  // Code points, not UTF-16 units, so `é?` makes the whole `é` optional.
  const chars = Array.from(pattern);
  const fail = (position: number, reason: string): never => {
    throw new InvalidFilterPatternError(pattern, position, reason);
  };
  let source = '';
  // Whether the last emitted atom can take a `?`/`+` (a character or a set).
  let repeatable = false;
  let i = 0;
  while (i < chars.length) {
    const c = chars[i]!;
    if (c === '*') {
      if (chars[i + 1] === '*') {
        if (chars[i + 2] === '/') {
          source += '(?:.+/)?';
          i += 3;
        } else {
          source += '.*';
          i += 2;
        }
      } else {
        source += '[^/]*';
        i += 1;
      }
      repeatable = false;
    } else if (c === '?' || c === '+') {
      if (i === 0) {
        source += escapeLiteral(c);
        repeatable = true;
      } else if (repeatable) {
        source += c;
        repeatable = false;
      } else if (c === '+') {
        // act hands `*+`, `a?+`, `a++` to RE2, which rejects nested repetition.
        fail(i, "'+' must follow a character, an escape or a set");
      }
      // A `?` after `*`, `**` or a quantifier only makes it lazy in act's regex:
      // the set of matching strings is unchanged, so it is dropped here.
      i += 1;
    } else if (c === '[') {
      const end = readCharacterSet(chars, i, fail);
      source += end.source;
      i = end.next;
      repeatable = true;
    } else if (c === '\\') {
      const next = chars[i + 1];
      if (next === undefined) fail(i, "missing character after '\\'");
      source += escapeLiteral(next!);
      i += 2;
      repeatable = true;
    } else {
      source += escapeLiteral(c);
      i += 1;
      repeatable = true;
    }
  }
  // `s`: `**` also crosses newlines, which git allows in names.
  return new RegExp(`^${source}$`, 'su');
}

// `[` at `open`; returns the regex set and the index after `]`. act accepts only
// ASCII letters, digits and the six characters between `Z` and `a` (it checks the
// span `A`..`z`), and ranges whose ends lie both in `A`..`z` or both in `0`..`9`.
function readCharacterSet(
  chars: readonly string[],
  open: number,
  fail: (position: number, reason: string) => never,
): { source: string; next: number } {
  let i = open + 1;
  if (chars[i] === ']') fail(i, "empty set '[]'");
  let body = '';
  let previousWasRangeEnd = false;
  while (i < chars.length && chars[i] !== ']') {
    const c = chars[i]!;
    if (c === '-') {
      const low = chars[i - 1]!;
      const high = chars[i + 1];
      const startsSet = i === open + 1;
      if (startsSet || previousWasRangeEnd || high === undefined || high === ']' || !isValidRange(low, high)) {
        fail(i, 'invalid range: ranges can only include a-z, A-Z, A-z and 0-9, low to high');
      }
      body += `-${escapeInSet(high!)}`;
      i += 2;
      previousWasRangeEnd = true;
      continue;
    }
    if (!isSetCharacter(c)) fail(i, 'sets can only include a-z, A-Z and 0-9');
    body += escapeInSet(c);
    i += 1;
    previousWasRangeEnd = false;
  }
  if (i >= chars.length) fail(i, "missing closing ']'");
  return { source: `[${body}]`, next: i + 1 };
}

function inSpan(c: string, low: string, high: string): boolean {
  return c.length === 1 && c >= low && c <= high;
}

function isSetCharacter(c: string): boolean {
  return inSpan(c, 'A', 'z') || inSpan(c, '0', '9');
}

function isValidRange(low: string, high: string): boolean {
  const within = (a: string, b: string) => inSpan(low, a, b) && inSpan(high, a, b);
  return (within('A', 'z') || within('0', '9')) && low <= high;
}

// Regex syntax characters, plus `/` which the `u` flag also lets us escape.
const SYNTAX = /[\\^$.*+?()[\]{}|/]/u;

function escapeLiteral(c: string): string {
  return SYNTAX.test(c) ? `\\${c}` : c;
}

// Inside a set only `\`, `]`, `^` and `-` mean something; of those the span A..z
// can bring `\`, `]` (only as a range end, refused above) and `^`; `[` is escaped
// for readability.
function escapeInSet(c: string): string {
  return '\\]^-['.includes(c) ? `\\${c}` : c;
}
