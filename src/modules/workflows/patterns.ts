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
//
// Matching runs on ../text-automaton.ts, linear in the value: act's RegExp
// translation backtracks, and hostile patterns froze the server (issue 13).

import { anyChar, compileAutomaton, literal } from '../text-automaton.ts';
import type { CharTest, Matcher, Pattern } from '../text-automaton.ts';

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
    return { negative, matches: compileFilterPattern(negative ? raw.slice(1) : raw) };
  });
  return (value) => {
    // Scanning from the end, the first match is the last in sequence: it decides.
    for (let i = compiled.length - 1; i >= 0; i--) {
      const entry = compiled[i]!;
      if (entry.matches(value)) return !entry.negative;
    }
    return false;
  };
}

const SLASH = 0x2f;
const notSlash: CharTest = (c) => c !== SLASH;
const star = (test: CharTest): Pattern => ({ kind: 'star', item: { kind: 'char', test } });

/** One pattern (without its `!` prefix) as a matcher of whole values, linear in the value. */
export function compileFilterPattern(pattern: string): Matcher {
  return compileAutomaton(parseFilterPattern(pattern).pattern);
}

/** A parsed pattern and the count the limits are about (see filterPatternProblem). */
export interface FilterPatternShape {
  pattern: Pattern;
  /** Wildcard characters: `*` (each of `**`), and `?`/`+` where they repeat or are dropped. */
  wildcards: number;
}

/**
 * Reads the pattern as act's workflowpattern translates it to a regular
 * expression (`*` → `[^/]*`, `**` → `.*`, `**` then `/` → `(?:.+/)?`, `x?`,
 * `x+`), producing the automaton's language instead of regex source.
 */
export function parseFilterPattern(pattern: string): FilterPatternShape {
  // Code points, not UTF-16 units, so `é?` makes the whole `é` optional.
  const chars = Array.from(pattern);
  const fail = (position: number, reason: string): never => {
    throw new InvalidFilterPatternError(pattern, position, reason);
  };
  const items: Pattern[] = [];
  let wildcards = 0;
  // Whether the last item can take a `?`/`+` (a character or a set).
  let repeatable = false;
  let i = 0;
  while (i < chars.length) {
    const c = chars[i]!;
    if (c === '*') {
      if (chars[i + 1] === '*') {
        wildcards += 2;
        if (chars[i + 2] === '/') {
          // `(?:.+/)?`: zero or more leading directories.
          items.push({
            kind: 'opt',
            item: { kind: 'seq', items: [{ kind: 'plus', item: { kind: 'char', test: anyChar } }, literal('/')] },
          });
          i += 3;
        } else {
          items.push(star(anyChar));
          i += 2;
        }
      } else {
        wildcards += 1;
        items.push(star(notSlash));
        i += 1;
      }
      repeatable = false;
    } else if (c === '?' || c === '+') {
      if (i === 0) {
        items.push(literal(c));
        repeatable = true;
      } else if (repeatable) {
        wildcards += 1;
        const last = items.pop()!;
        items.push({ kind: c === '?' ? 'opt' : 'plus', item: last });
        repeatable = false;
      } else if (c === '+') {
        // act hands `*+`, `a?+`, `a++` to RE2, which rejects nested repetition.
        fail(i, "'+' must follow a character, an escape or a set");
      } else {
        // A `?` after `*`, `**` or a quantifier only makes it lazy in act's regex:
        // the set of matching strings is unchanged, so it is dropped here.
        wildcards += 1;
      }
      i += 1;
    } else if (c === '[') {
      const end = readCharacterSet(chars, i, fail);
      items.push({ kind: 'char', test: end.test });
      i = end.next;
      repeatable = true;
    } else if (c === '\\') {
      const next = chars[i + 1];
      if (next === undefined) fail(i, "missing character after '\\'");
      items.push(literal(next!));
      i += 2;
      repeatable = true;
    } else {
      items.push(literal(c));
      i += 1;
      repeatable = true;
    }
  }
  // anyChar takes newlines too: `**` crosses them, as git allows them in names.
  return { pattern: { kind: 'seq', items }, wildcards };
}

/**
 * Limits on one workflow filter pattern (Gantry's own; act and Forgejo have
 * none). Real patterns are short paths and names (`docs/*.md`, `src/**`); these leave
 * ample room while keeping each push's matching small: a push touching many
 * files matches every changed path against every pattern.
 */
export const MAX_FILTER_PATTERN_CHARS = 1000;
export const MAX_FILTER_PATTERN_WILDCARDS = 64;

/**
 * Why a pattern (with or without its `!`) is over the limits, or null. Syntax
 * errors are not reported here: like act, a malformed pattern only makes its
 * filter never match.
 */
export function filterPatternProblem(raw: string): string | null {
  let length = 0;
  for (const _ of raw)
    if (++length > MAX_FILTER_PATTERN_CHARS) return `longer than ${MAX_FILTER_PATTERN_CHARS} characters`;
  try {
    const { wildcards } = parseFilterPattern(raw.startsWith('!') ? raw.slice(1) : raw);
    if (wildcards > MAX_FILTER_PATTERN_WILDCARDS)
      return `more than ${MAX_FILTER_PATTERN_WILDCARDS} wildcards (*, ? and +)`;
  } catch (error) {
    if (!(error instanceof InvalidFilterPatternError)) throw error;
  }
  return null;
}

// `[` at `open`; returns the set's test and the index after `]`. act accepts only
// ASCII letters, digits and the six characters between `Z` and `a` (it checks the
// span `A`..`z`), and ranges whose ends lie both in `A`..`z` or both in `0`..`9`.
function readCharacterSet(
  chars: readonly string[],
  open: number,
  fail: (position: number, reason: string) => never,
): { test: CharTest; next: number } {
  let i = open + 1;
  if (chars[i] === ']') fail(i, "empty set '[]'");
  // All members are ASCII (checked below): one UTF-16 unit each.
  const singles = new Set<string>();
  const ranges: [string, string][] = [];
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
      // The low end is already among the singles, which is harmless: it is in the range.
      ranges.push([low, high!]);
      i += 2;
      previousWasRangeEnd = true;
      continue;
    }
    if (!isSetCharacter(c)) fail(i, 'sets can only include a-z, A-Z and 0-9');
    singles.add(c);
    i += 1;
    previousWasRangeEnd = false;
  }
  if (i >= chars.length) fail(i, "missing closing ']'");
  const codes = new Set(Array.from(singles, (c) => c.charCodeAt(0)));
  const spans = ranges.map(([low, high]) => [low.charCodeAt(0), high.charCodeAt(0)] as const);
  const test: CharTest = (c) => codes.has(c) || spans.some(([low, high]) => c >= low && c <= high);
  return { test, next: i + 1 };
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
