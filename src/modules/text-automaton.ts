// Whole-string matching in linear time, for the two glob dialects users send
// us (webhook branch filters, glob.ts; workflow filters, workflows/patterns.ts).
//
// Why not RegExp: V8's engine backtracks, so a pattern such as `*a*a*a*a*b`
// against a long branch name costs O(n^k) and a single push froze the server
// (issue 13). Here a pattern becomes a Thompson NFA and the subject is read
// once, carrying the set of live states (Thompson's simulation):
//
//   cost of one match  O(n · m)   n code points of subject, m states (≤ 2 per pattern element)
//   memory             O(m)       state lists and marks, reused between matches, plus each
//                                 state's ε-closure once first needed (a few states each in
//                                 practice; at most m² entries in all)
//
// No input can make it slower than that, whatever the nesting of `{…}` or the
// number of wildcards; bounds on pattern size (checked where patterns are
// accepted) keep m, and so the constant, small.
//
// Contract: the subject is read by code points (as a RegExp with the `u` flag
// reads it), every test sees exactly one code point, and a match must consume
// the whole subject (anchored at both ends, as `^…$`).

/** A test on one code point (a lone surrogate counts as one, as in a RegExp with `u`). */
export type CharTest = (codePoint: number) => boolean;

/** The little regular language both glob dialects compile to. */
export type Pattern =
  | {
      kind: 'char';
      test: CharTest;
      /** Set when the test is "equals this code point" (a faster path). */ exactly?: number;
    }
  | { kind: 'seq'; items: Pattern[] }
  | { kind: 'alt'; items: Pattern[] }
  | { kind: 'star'; item: Pattern }
  | { kind: 'plus'; item: Pattern }
  | { kind: 'opt'; item: Pattern };

export const anyChar: CharTest = () => true;

export function literal(text: string): Pattern {
  return {
    kind: 'seq',
    items: Array.from(text, (c): Pattern => {
      const codePoint = c.codePointAt(0)!;
      return { kind: 'char', test: (x) => x === codePoint, exactly: codePoint };
    }),
  };
}

export type Matcher = (text: string) => boolean;

// What a state does. ROUTE states consume nothing and lead to each of their
// exits; the others consume one code point that passes their test and lead to
// their single exit; ACCEPT ends a match.
const ROUTE = 0;
const ANY = 1;
const EXACTLY = 2;
const TEST = 3;
const ACCEPT = 4;

/** Compiles a pattern to a matcher; compiling is O(size of the pattern). */
export function compileAutomaton(pattern: Pattern): Matcher {
  const kinds: number[] = [ACCEPT];
  const exactly: number[] = [-1];
  const tests: (CharTest | undefined)[] = [undefined];
  const exits: number[][] = [[]];
  const add = (kind: number, next: number[], p?: { test: CharTest; exactly?: number }): number => {
    kinds.push(kind);
    exactly.push(p?.exactly ?? -1);
    tests.push(p?.test);
    return exits.push(next) - 1;
  };

  // Built back to front: `build(p, next)` returns the entry state of p whose
  // exits lead to `next`. Depth of recursion = nesting depth of the pattern,
  // which the callers' length limits keep in the hundreds at most.
  const build = (p: Pattern, next: number): number => {
    switch (p.kind) {
      case 'char':
        return add(p.test === anyChar ? ANY : p.exactly !== undefined ? EXACTLY : TEST, [next], p);
      case 'seq': {
        let entry = next;
        for (let i = p.items.length - 1; i >= 0; i--) entry = build(p.items[i]!, entry);
        return entry;
      }
      case 'alt':
        return add(
          ROUTE,
          p.items.map((item) => build(item, next)),
        );
      case 'opt':
        return add(ROUTE, [build(p.item, next), next]);
      case 'star': {
        // The loop state is created first so that the body can lead back to it.
        const loop = add(ROUTE, []);
        exits[loop]!.push(build(p.item, loop), next);
        return loop;
      }
      case 'plus': {
        const loop = add(ROUTE, []);
        const body = build(p.item, loop);
        exits[loop]!.push(body, next);
        return body;
      }
    }
  };
  const start = build(pattern, 0);
  const count = kinds.length;

  // mark[s] === generation ⇔ s is already in the list being built, so a state
  // enters each list at most once: the O(m) per code point. (Float64: exact for
  // 2^53 generations, where 32 bits would wrap after 4e9 code points.)
  const mark = new Float64Array(count);
  let generation = 0;

  // The consuming states and ACCEPT reachable from a state without consuming,
  // computed once per state on first use: the simulation then never walks
  // ROUTE states. Total size is bounded by (states)², in practice a few per state.
  // It has its own marks: it may run in the middle of a step, whose marks must stay.
  const closures: (Int32Array | undefined)[] = new Array(count);
  const seen = new Float64Array(count);
  let closureGeneration = 0;
  const stack: number[] = [];
  const closureOf = (from: number): Int32Array => {
    const cached = closures[from];
    if (cached) return cached;
    closureGeneration += 1;
    const found: number[] = [];
    seen[from] = closureGeneration;
    stack.push(from);
    while (stack.length > 0) {
      const s = stack.pop()!;
      if (kinds[s] !== ROUTE) {
        found.push(s);
        continue;
      }
      for (const t of exits[s]!) {
        if (seen[t] !== closureGeneration) {
          seen[t] = closureGeneration;
          stack.push(t);
        }
      }
    }
    const closure = Int32Array.from(found);
    closures[from] = closure;
    return closure;
  };
  // A consuming state's single exit: reading a passing code point leads to its closure.
  const exitOf = Int32Array.from(exits, (next) => next[0] ?? 0);

  let current = new Int32Array(count);
  let following = new Int32Array(count);

  return (text) => {
    const initial = closureOf(start);
    current.set(initial);
    let size = initial.length;
    // By code points without allocating: a surrogate pair is one, a lone surrogate is one.
    for (let at = 0; at < text.length;) {
      const c = text.codePointAt(at)!;
      at += c > 0xffff ? 2 : 1;
      if (size === 0) return false;
      generation += 1;
      let nextSize = 0;
      for (let i = 0; i < size; i++) {
        const s = current[i]!;
        const kind = kinds[s];
        const passes = kind === ANY || (kind === EXACTLY ? exactly[s] === c : kind === TEST && tests[s]!(c));
        if (!passes) continue;
        const reached = closureOf(exitOf[s]!);
        for (let j = 0; j < reached.length; j++) {
          const t = reached[j]!;
          if (mark[t] !== generation) {
            mark[t] = generation;
            following[nextSize++] = t;
          }
        }
      }
      [current, following] = [following, current];
      size = nextSize;
    }
    for (let i = 0; i < size; i++) if (kinds[current[i]!] === ACCEPT) return true;
    return false;
  };
}
