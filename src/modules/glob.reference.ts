// REFERENCE ONLY, never imported by the server: the RegExp translation that
// glob.ts used before issue 13, kept as the oracle for the property tests in
// glob.test.ts (it backtracks, so only short inputs are fed to it). One fix:
// see escapeRegExp. The lexer is glob.ts's own (glob-lexer.ts).
// Glob patterns as github.com/gobwas/glob compiles them without separators —
// what Forgejo uses for webhook branch filters (binding rule `GlobPattern` and
// models/webhook/webhook.go checkBranch). Without separators `*` and `**` both
// match any run of characters and `?` any one character. Syntax errors carry
// gobwas' texts, since Forgejo answers them verbatim in `[BranchFilter]: <error>`.

import { Lexer } from './glob-lexer.ts';

function escapeRegExp(text: string): string {
  // Fixed here: the original also escaped `-`, which the `u` flag rejects outside
  // a set, so every filter with a `-` (`release-*`) failed to compile.
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

function classChar(r: string): string {
  return `\\u{${(r.codePointAt(0) as number).toString(16)}}`;
}

/** Parses like gobwas syntax/ast/parser.go and emits an anchored regular expression. */
function toRegExpSource(pattern: string): string {
  const lex = new Lexer(pattern);
  // One frame per open `{`: the alternatives seen so far and the current one.
  const stack: { alternatives: string[]; current: string }[] = [{ alternatives: [], current: '' }];
  const top = () => stack[stack.length - 1] as { alternatives: string[]; current: string };
  for (;;) {
    const token = lex.next();
    switch (token.type) {
      case 'eof':
        // An unclosed `{` is refused (see glob.ts).
        if (stack.length > 1) throw new Error('unexpected end of input');
        return `^${top().current}$`;
      case 'error':
        throw new Error(token.raw);
      case 'text':
        top().current += escapeRegExp(token.raw);
        break;
      case 'any':
      case 'super':
        top().current += '.*';
        break;
      case 'single':
        top().current += '.';
        break;
      case 'range_open':
        top().current += parseRange(lex);
        break;
      case 'terms_open':
        stack.push({ alternatives: [], current: '' });
        break;
      case 'separator':
        top().alternatives.push(top().current);
        top().current = '';
        break;
      case 'terms_close': {
        const frame = stack.pop() as { alternatives: string[]; current: string };
        top().current += `(?:${[...frame.alternatives, frame.current].join('|')})`;
        break;
      }
      default:
        throw new Error(`unexpected token: ${token.raw}`);
    }
  }
}

function parseRange(lex: Lexer): string {
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
        const body = isRange ? `${classChar(lo)}-${classChar(hi)}` : Array.from(chars, classChar).join('');
        return `[${not ? '^' : ''}${body}]`;
      }
      default:
        throw new Error(`unexpected token: ${token.raw}`);
    }
  }
}

/** Throws gobwas' error text when the pattern does not compile. */
export function compileGlob(pattern: string): (text: string) => boolean {
  const re = new RegExp(toRegExpSource(pattern), 'su');
  return (text) => re.test(text);
}

/**
 * A webhook branch filter: empty (or `*`) matches everything, as Forgejo's
 * checkBranch; anything else must compile as a gobwas glob (throws otherwise).
 */
export function compileBranchFilter(pattern: string): (branch: string) => boolean {
  if (pattern === '' || pattern === '*') return () => true;
  return compileGlob(pattern);
}
