// Glob patterns as github.com/gobwas/glob compiles them without separators —
// what Forgejo uses for webhook branch filters (binding rule `GlobPattern` and
// models/webhook/webhook.go checkBranch). Without separators `*` and `**` both
// match any run of characters and `?` any one character. Syntax errors carry
// gobwas' texts, since Forgejo answers them verbatim in `[BranchFilter]: <error>`.
//
// Matching runs on text-automaton.ts (linear in the branch name): the RegExp
// this module used to emit backtracked, and `*a*a*a*a*b` against a long branch
// name froze the server (issue 13).

import { anyChar, compileAutomaton, literal } from './text-automaton.ts';
import type { Matcher, Pattern } from './text-automaton.ts';
import { Lexer } from './glob-lexer.ts';

type Frame = { alternatives: Pattern[]; current: Pattern[] };

const seq = (items: Pattern[]): Pattern => ({ kind: 'seq', items });
const alt = (frame: Frame): Pattern => ({ kind: 'alt', items: [...frame.alternatives, seq(frame.current)] });

/** A parsed filter and the count the limits are about (see branchFilterProblem). */
export interface GlobShape {
  pattern: Pattern;
  /** `*` and `?` tokens, `**` counting twice (its characters, as a user counts). */
  wildcards: number;
}

/**
 * Parses like gobwas syntax/ast/parser.go. Without separators gobwas' `*`, `**`
 * and `?` are "any run" and "any one character", so the tree maps directly to
 * the automaton's language: text → characters, `{a,b}` → alternation.
 */
export function parseGlob(source: string): GlobShape {
  const lex = new Lexer(source);
  // One frame per open `{`: the alternatives seen so far and the current one.
  const stack: Frame[] = [{ alternatives: [], current: [] }];
  const top = () => stack[stack.length - 1] as Frame;
  let wildcards = 0;
  for (;;) {
    const token = lex.next();
    switch (token.type) {
      case 'eof':
        // An unclosed `{` is refused: Forgejo's GlobPattern binding
        // (modules/validation/binding.go) answers it with a 422.
        if (stack.length > 1) throw new Error('unexpected end of input');
        return { pattern: seq(top().current), wildcards };
      case 'error':
        throw new Error(token.raw);
      case 'text':
        top().current.push(literal(token.raw));
        break;
      case 'any':
      case 'super':
        wildcards += token.raw.length;
        top().current.push({ kind: 'star', item: { kind: 'char', test: anyChar } });
        break;
      case 'single':
        wildcards += 1;
        top().current.push({ kind: 'char', test: anyChar });
        break;
      case 'range_open':
        top().current.push(parseRange(lex));
        break;
      case 'terms_open':
        stack.push({ alternatives: [], current: [] });
        break;
      case 'separator':
        top().alternatives.push(seq(top().current));
        top().current = [];
        break;
      case 'terms_close': {
        const frame = stack.pop() as Frame;
        top().current.push(alt(frame));
        break;
      }
      default:
        throw new Error(`unexpected token: ${token.raw}`);
    }
  }
}

function parseRange(lex: Lexer): Pattern {
  let not = false;
  let lo = '';
  let hi = '';
  let chars = '';
  for (;;) {
    const token = lex.next();
    switch (token.type) {
      case 'eof':
        throw new Error('unexpected end');
      case 'error':
        throw new Error(token.raw);
      case 'not':
        not = true;
        break;
      case 'range_lo':
        lo = token.raw;
        break;
      case 'range_between':
        break;
      case 'range_hi':
        hi = token.raw;
        if ((hi.codePointAt(0) as number) < (lo.codePointAt(0) as number))
          throw new Error(`hi character '${hi}' should be greater than lo '${lo}'`);
        break;
      case 'text':
        chars = token.raw;
        break;
      case 'range_close': {
        const isRange = lo !== '' && hi !== '';
        const isChars = chars !== '';
        if (isChars === isRange) throw new Error('could not parse range');
        if (isRange) {
          const low = lo.codePointAt(0) as number;
          const high = hi.codePointAt(0) as number;
          return { kind: 'char', test: (c) => (c >= low && c <= high) !== not };
        }
        const set = new Set(Array.from(chars, (c) => c.codePointAt(0) as number));
        return { kind: 'char', test: (c) => set.has(c) !== not };
      }
      default:
        throw new Error(`unexpected token: ${token.raw}`);
    }
  }
}

/** Throws gobwas' error text when the pattern does not compile. Matching is linear in the subject. */
export function compileGlob(pattern: string): Matcher {
  return compileAutomaton(parseGlob(pattern).pattern);
}

/**
 * Limits on what a branch filter may be, checked where a hook is created or
 * edited (Gantry's own: Forgejo has none). Real filters are a few names or
 * prefixes (`{main,release/*}`); these leave ample room while keeping the
 * automaton, and so each push's matching, small.
 */
export const MAX_BRANCH_FILTER_CHARS = 1000;
export const MAX_BRANCH_FILTER_WILDCARDS = 64;

/**
 * Validates a branch filter as Forgejo's `GlobPattern` binding does (the
 * pattern must compile; the message is gobwas' text), then Gantry's limits.
 * Returns null when acceptable, else the message for `[BranchFilter]: …`.
 */
export function branchFilterProblem(pattern: string): string | null {
  if (pattern === '') return null;
  // Counted in code points, like the characters a user sees.
  let length = 0;
  for (const _ of pattern)
    if (++length > MAX_BRANCH_FILTER_CHARS) return `longer than ${MAX_BRANCH_FILTER_CHARS} characters`;
  let shape: GlobShape;
  try {
    shape = parseGlob(pattern);
  } catch (error) {
    return (error as Error).message;
  }
  if (shape.wildcards > MAX_BRANCH_FILTER_WILDCARDS)
    return `more than ${MAX_BRANCH_FILTER_WILDCARDS} wildcards (* and ?)`;
  return null;
}

/**
 * A webhook branch filter: empty (or `*`) matches everything, as Forgejo's
 * checkBranch; anything else must compile as a gobwas glob (throws otherwise).
 */
export function compileBranchFilter(pattern: string): Matcher {
  if (pattern === '' || pattern === '*') return () => true;
  return compileGlob(pattern);
}
