// `${{ }}` templates in workflow values, evaluated with @actions/expressions while a run is
// planned. Only the contexts known at that moment are offered (github, vars, inputs, and per
// matrix leg matrix and strategy); no status functions, since no job has run yet.

import { Evaluator, Lexer, Parser, data } from '@actions/expressions';
import type { Expr } from '@actions/expressions';
import type { FunctionDefinition } from '@actions/expressions/funcs/info';
import { TokenType } from '@actions/expressions/lexer';

export class ExpressionFailure extends Error {}

type Segment = { kind: 'text'; text: string } | { kind: 'expression'; source: string };

export function containsExpression(text: string): boolean {
  return text.includes('${{');
}

/** Index of the `}}` closing an expression that starts at `from`; `}}` inside a '…' literal does not count. */
function findExpressionEnd(template: string, from: number): number {
  let inString = false;
  for (let i = from; i < template.length; i++) {
    const ch = template[i];
    if (inString) {
      if (ch === "'") {
        if (template[i + 1] === "'") i++;
        else inString = false;
      }
    } else if (ch === "'") {
      inString = true;
    } else if (ch === '}' && template[i + 1] === '}') {
      return i;
    }
  }
  return -1;
}

function splitTemplate(template: string): Segment[] {
  const segments: Segment[] = [];
  let position = 0;
  for (;;) {
    const start = template.indexOf('${{', position);
    if (start < 0) {
      if (position < template.length) segments.push({ kind: 'text', text: template.slice(position) });
      return segments;
    }
    if (start > position) segments.push({ kind: 'text', text: template.slice(position, start) });
    const end = findExpressionEnd(template, start + 3);
    if (end < 0) throw new ExpressionFailure(`unclosed expression in '${template}'`);
    segments.push({ kind: 'expression', source: template.slice(start + 3, end).trim() });
    position = end + 2;
  }
}

/**
 * Whether any expression in `template` reads the context `name` (e.g. `needs`). Used to tell
 * "not known yet" apart from a plain mistake; a template that does not lex answers false.
 */
export function readsContext(template: string, name: string): boolean {
  if (!containsExpression(template)) return false;
  try {
    return splitTemplate(template).some((segment) => {
      if (segment.kind !== 'expression') return false;
      const tokens = new Lexer(segment.source).lex().tokens;
      return tokens.some(
        (token, i) =>
          token.type === TokenType.IDENTIFIER &&
          token.lexeme.toLowerCase() === name &&
          tokens[i - 1]?.type !== TokenType.DOT,
      );
    });
  } catch {
    return false;
  }
}

// Parsed expressions are reused across runs: the same workflow is expanded for every push.
const PARSED_CACHE_LIMIT = 2000;
const parsedCache = new Map<string, Expr>();

function parseExpression(
  source: string,
  contextNames: readonly string[],
  functions: readonly FunctionDefinition[] = [],
): Expr {
  const key = `${contextNames.join(',')}\n${functions.map((f) => f.name).join(',')}\n${source}`;
  const cached = parsedCache.get(key);
  if (cached) return cached;
  const expr = new Parser(new Lexer(source).lex().tokens, [...contextNames], [...functions]).parse();
  if (parsedCache.size >= PARSED_CACHE_LIMIT) parsedCache.clear();
  parsedCache.set(key, expr);
  return expr;
}

function toExpressionData(value: unknown): data.ExpressionData {
  return JSON.parse(JSON.stringify(value ?? null), data.reviver) as data.ExpressionData;
}

function toPlain(value: data.ExpressionData | undefined): unknown {
  if (value === undefined) return null;
  return JSON.parse(JSON.stringify(value, data.replacer)) as unknown;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A context converted to expression data on first use, shared by every scope that holds it. */
interface ContextEntry {
  readonly plain: unknown;
  converted?: data.ExpressionData;
}

/**
 * The named contexts an expression may read, e.g. `{ github, vars, inputs }`, and the
 * functions beyond the built-in ones (the runner adds the status functions, success() …).
 */
export class ExpressionScope {
  private root: data.Dictionary | undefined;
  private functionMap: Map<string, FunctionDefinition> | undefined;

  private constructor(
    private readonly entries: ReadonlyMap<string, ContextEntry>,
    private readonly functions: readonly FunctionDefinition[] = [],
  ) {}

  static of(contexts: Record<string, unknown>, functions: readonly FunctionDefinition[] = []): ExpressionScope {
    return new ExpressionScope(new Map(Object.entries(contexts).map(([name, plain]) => [name, { plain }])), functions);
  }

  /** A scope with more contexts; the ones already converted here are not converted again. */
  extend(contexts: Record<string, unknown>): ExpressionScope {
    const entries = new Map(this.entries);
    for (const [name, plain] of Object.entries(contexts)) entries.set(name, { plain });
    return new ExpressionScope(entries, this.functions);
  }

  private dictionary(): data.Dictionary {
    if (!this.root) {
      const root = new data.Dictionary();
      for (const [name, entry] of this.entries) {
        entry.converted ??= toExpressionData(entry.plain);
        root.add(name, entry.converted);
      }
      this.root = root;
    }
    return this.root;
  }

  private run(source: string): data.ExpressionData {
    try {
      const expr = parseExpression(source, [...this.entries.keys()], this.functions);
      this.functionMap ??= new Map(this.functions.map((f) => [f.name.toLowerCase(), f]));
      return new Evaluator(expr, this.dictionary(), this.functionMap).evaluate();
    } catch (error) {
      throw new ExpressionFailure(`cannot evaluate '\${{ ${source} }}': ${describe(error)}`);
    }
  }

  /**
   * A template that is exactly one `${{ }}` yields the expression's own value (so
   * `${{ fromJSON(vars.OSES) }}` can be a list); anything else yields the interpolated string.
   */
  evaluate(template: string): unknown {
    if (!containsExpression(template)) return template;
    const segments = splitTemplate(template);
    const only = segments[0];
    if (segments.length === 1 && only?.kind === 'expression') return toPlain(this.run(only.source));
    return this.interpolateSegments(segments);
  }

  interpolate(template: string): string {
    if (!containsExpression(template)) return template;
    return this.interpolateSegments(splitTemplate(template));
  }

  private interpolateSegments(segments: Segment[]): string {
    return segments
      .map((segment) => (segment.kind === 'text' ? segment.text : this.run(segment.source).coerceString()))
      .join('');
  }
}
