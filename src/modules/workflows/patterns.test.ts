import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  compileFilterPattern,
  compileFilterPatterns,
  filterPatternProblem,
  InvalidFilterPatternError,
  MAX_FILTER_PATTERN_CHARS,
  MAX_FILTER_PATTERN_WILDCARDS,
} from './patterns.ts';
import { filterPatternToRegExp as referencePattern } from './patterns.reference.ts';

function check(patterns: string[], yes: string[], no: string[]): void {
  const matches = compileFilterPatterns(patterns);
  for (const value of yes) assert.equal(matches(value), true, `${patterns.join(',')} should select ${value}`);
  for (const value of no) assert.equal(matches(value), false, `${patterns.join(',')} should not select ${value}`);
}

// GitHub's "Filter pattern cheat sheet", branches and tags.
test('cheat sheet: branch and tag patterns', () => {
  check(
    ['feature/*'],
    ['feature/my-branch', 'feature/your-branch', 'feature/'],
    ['feature/beta-a/my-branch', 'feature'],
  );
  check(
    ['feature/**'],
    ['feature/beta-a/my-branch', 'feature/your-branch', 'feature/mona/the/octocat'],
    ['features/x'],
  );
  check(['main', 'releases/mona-the-octocat'], ['main', 'releases/mona-the-octocat'], ['mainline', 'releases/other']);
  check(['*'], ['main', 'releases'], ['releases/v1']);
  check(['**'], ['all/the/branches', 'every/tag', 'x'], []);
  check(['*feature'], ['mona-feature', 'feature', 'ver-10-feature'], ['feature-x', 'a/feature']);
  check(['v2*'], ['v2', 'v2.0', 'v2.9'], ['v1', 'xv2']);
  check(['v[12].[0-9]+.[0-9]+'], ['v1.10.1', 'v2.0.0'], ['v3.0.0', 'v1.x.1', 'v1.1', 'v1.0.0-rc1']);
});

// The cheat sheet's file path patterns.
test('cheat sheet: path patterns', () => {
  check(['*'], ['README.md', 'server.rb'], ['docs/README.md']);
  check(['*.jsx?'], ['page.js', 'page.jsx'], ['page.jsxx', 'src/page.js']);
  check(['**'], ['all/the/files.md'], []);
  check(['*.js'], ['app.js', 'index.js'], ['js/index.js']);
  check(['**.js'], ['index.js', 'js/index.js', 'src/js/app.js'], ['index.ts']);
  check(['docs/*'], ['docs/README.md', 'docs/file.txt'], ['docs/mona/octocat.txt']);
  check(['docs/**'], ['docs/README.md', 'docs/mona/octocat.txt'], ['README.md', 'a/docs/x']);
  check(['docs/**/*.md'], ['docs/README.md', 'docs/mona/hello-world.md', 'docs/a/markdown/file.md'], ['docs/a.txt']);
  check(['**/docs/**'], ['docs/hello.md', 'dir/docs/my-file.txt', 'space/docs/plan/space.doc'], ['documents/x']);
  check(['**/README.md'], ['README.md', 'js/README.md'], ['README.mdx']);
  check(['**/*src/**'], ['a/src/app.js', 'my-src/code/js/app.js'], ['src']);
  check(['**/*-post.md'], ['my-post.md', 'path/their-post.md'], ['post.md']);
  check(['**/migrate-*.sql'], ['migrate-10909.sql', 'db/migrate-v1.0.sql', 'db/sept/migrate-v1.sql'], ['migrate.sql']);
  check(['*.md'], ['hello.md'], ['docs/hello.md']);
});

test('negation is evaluated in sequence: the last matching pattern decides', () => {
  check(['*.md', '!README.md'], ['hello.md'], ['README.md', 'docs/hello.md']);
  check(['*.md', '!README.md', 'README*'], ['hello.md', 'README.md', 'README.doc'], ['other.doc']);
  check(['feature/**', '!feature/wip-*'], ['feature/a', 'feature/x/wip-1'], ['feature/wip-1']);
  check(['!feature/wip-*', 'feature/**'], ['feature/wip-1'], []);
  // Only negations: nothing was selected to begin with.
  check(['!main'], [], ['main', 'dev']);
  check([], [], ['main', '']);
});

test('quantifiers apply to the preceding character or set, and are literal first', () => {
  check(['ab+c'], ['abc', 'abbbc'], ['ac']);
  check(['ab?c'], ['abc', 'ac'], ['abbc']);
  check(['[0-9]+'], ['1', '2024'], ['', 'a1']);
  check(['+x', '?y'], ['+x', '?y'], ['x', 'y']);
  check(['v*?'], ['v', 'v1'], []); // `?` after `*` only makes it lazy
  check(['é?x'], ['x', 'éx'], ['ex']); // a whole code point is optional
});

test('sets and ranges', () => {
  check(['[abc]'], ['a', 'c'], ['d', 'ab']);
  check(['[A-Fa-f0-9]'], ['A', 'f', '7'], ['g', '-']);
  check(['[Z-a]'], ['_', '^', '`', '[', '\\'], ['b', 'Y']); // the span between Z and a
  for (const bad of ['[]', '[a', '[-a]', '[a-]', '[z-a]', '[a-9]', '[.]', '[a-c-e]', 'x[/]']) {
    assert.throws(() => compileFilterPatterns([bad]), InvalidFilterPatternError, bad);
  }
});

test('escapes make special characters literal', () => {
  check(['\\!file'], ['!file'], ['file']);
  check(['escape\\\\backslash'], ['escape\\backslash'], ['escapebackslash']);
  check(['a\\*b', 'c\\?', 'd\\[x\\]', 'e\\+'], ['a*b', 'c?', 'd[x]', 'e+'], ['axb', 'c', 'dx', 'ee']);
  check(['.yml'], ['.yml'], ['fyml']); // regex syntax in the pattern is literal
  check(['(a|b){2}$^'], ['(a|b){2}$^'], ['aa']);
  assert.throws(() => compileFilterPattern('trailing\\'), InvalidFilterPatternError);
});

test('nested repetition is rejected as act (RE2) rejects it', () => {
  for (const bad of ['a*+', 'a**+', 'a++', 'a?+']) {
    assert.throws(() => compileFilterPatterns([bad]), InvalidFilterPatternError, bad);
  }
  const error = (() => {
    try {
      compileFilterPatterns(['ok', '!x[']);
    } catch (e) {
      return e;
    }
  })();
  assert.ok(error instanceof InvalidFilterPatternError);
  assert.equal(error.pattern, 'x[');
  assert.equal(error.position, 2);
});

test('star stops at slashes; double star and names with newlines', () => {
  check(['a/*/c'], ['a/b/c', 'a//c'], ['a/b/b/c']);
  check(['a/**/c'], ['a/c', 'a/b/c', 'a/b/b/c'], ['ac']);
  check(['**'], ['line\nbreak'], []);
});

/** A matcher, or where and why the pattern is refused. */
function attempt(
  compile: (pattern: string) => (text: string) => boolean,
  pattern: string,
): ((text: string) => boolean) | string {
  try {
    return compile(pattern);
  } catch (error) {
    // The reference throws its own copy of InvalidFilterPatternError: compare names and texts.
    assert.equal((error as Error).name, 'InvalidFilterPatternError', String(error));
    return (error as Error).message;
  }
}

const referenceMatcher = (pattern: string) => {
  const regex = referencePattern(pattern);
  return (text: string) => regex.test(text);
};

test("agrees with the RegExp reference (act's translation) on random short patterns and values", () => {
  const patternChars = fc.constantFrom(
    'a',
    'b',
    '/',
    '.',
    '*',
    '?',
    '+',
    '[',
    ']',
    '-',
    'z',
    '0',
    '9',
    '\\',
    'é',
    '\n',
  );
  const valueChars = fc.constantFrom('a', 'b', '/', '.', 'z', '0', '-', '+', '?', '*', 'é', '\n');
  fc.assert(
    fc.property(
      fc.array(patternChars, { maxLength: 10 }),
      fc.array(fc.array(valueChars, { maxLength: 12 }), { minLength: 1, maxLength: 8 }),
      (p, values) => {
        const pattern = p.join('');
        const ours = attempt(compileFilterPattern, pattern);
        const theirs = attempt(referenceMatcher, pattern);
        if (typeof theirs === 'string' || typeof ours === 'string') {
          assert.equal(ours, theirs, `compile ${JSON.stringify(pattern)}`);
          return;
        }
        for (const v of values) {
          const value = v.join('');
          assert.equal(ours(value), theirs(value), `${JSON.stringify(pattern)} on ${JSON.stringify(value)}`);
        }
      },
    ),
    { numRuns: 3000 },
  );
});

test('hostile patterns match in linear time: 20 and 64 wildcards against 10,000 characters in milliseconds', () => {
  const subject = 'a/'.repeat(5_000);
  const cases: [string, boolean][] = [
    [`${'**a'.repeat(10)}b`, true],
    [`${'*a'.repeat(20)}*b`, false],
    [`${'a?'.repeat(MAX_FILTER_PATTERN_WILDCARDS)}b`, false],
    [`${'**/a+'.repeat(21)}b`, true],
  ];
  for (const [pattern, matchesLonger] of cases) {
    assert.equal(filterPatternProblem(pattern), null, 'within the limits');
    const match = compileFilterPatterns([pattern]);
    const started = performance.now();
    assert.equal(match(subject), false);
    assert.equal(match(`${subject}ab`), matchesLonger, pattern);
    const elapsed = performance.now() - started;
    // Linear: a few to 60 ms, even on a loaded machine; act's RegExp translation
    // does not finish in minutes. The bound is for a loaded machine.
    assert.ok(elapsed < 1500, `${pattern.slice(0, 20)}…: ${elapsed.toFixed(1)} ms`);
  }
});

test('limits on one pattern: length and wildcards; malformed patterns are not a limit problem', () => {
  assert.equal(filterPatternProblem('docs/**/*.md'), null);
  assert.equal(filterPatternProblem('x'.repeat(MAX_FILTER_PATTERN_CHARS)), null);
  assert.equal(
    filterPatternProblem('x'.repeat(MAX_FILTER_PATTERN_CHARS + 1)),
    `longer than ${MAX_FILTER_PATTERN_CHARS} characters`,
  );
  assert.equal(filterPatternProblem('*'.repeat(MAX_FILTER_PATTERN_WILDCARDS)), null);
  assert.equal(
    filterPatternProblem(`!${'*a'.repeat(MAX_FILTER_PATTERN_WILDCARDS)}+`),
    `more than ${MAX_FILTER_PATTERN_WILDCARDS} wildcards (*, ? and +)`,
  );
  assert.equal(filterPatternProblem('\\*'.repeat(MAX_FILTER_PATTERN_WILDCARDS + 1)), null, 'escaped stars are text');
  assert.equal(filterPatternProblem('x['), null, 'a syntax error only makes the filter never match (act)');
});
