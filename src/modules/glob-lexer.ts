// The lexer of github.com/gobwas/glob's syntax (syntax/lexer), shared by the
// glob matcher (glob.ts) and the RegExp oracle its property tests compare
// against (glob.reference.ts): both read the same tokens, so a difference the
// tests find is in how a pattern is matched, not in how it is read.

const EOF = '\0';

export type TokenType =
  | 'eof'
  | 'error'
  | 'text'
  | 'any'
  | 'super'
  | 'single'
  | 'range_open'
  | 'not'
  | 'range_lo'
  | 'range_between'
  | 'range_hi'
  | 'range_close'
  | 'terms_open'
  | 'separator'
  | 'terms_close';

export interface Token {
  type: TokenType;
  raw: string;
}

const IN_TEXT_BREAKERS = ['?', '*', '[', '{'];
const IN_TERMS_BREAKERS = [...IN_TEXT_BREAKERS, '}', ','];

/** A port of gobwas/glob syntax/lexer: lazy, and an error hides the tokens still queued. */
export class Lexer {
  private readonly runes: string[];
  private pos = 0;
  private err: string | null = null;
  private readonly tokens: Token[] = [];
  private termsLevel = 0;

  constructor(source: string) {
    this.runes = Array.from(source);
  }

  next(): Token {
    for (;;) {
      if (this.err !== null) return { type: 'error', raw: this.err };
      const queued = this.tokens.shift();
      if (queued) return queued;
      this.fetchItem();
    }
  }

  private read(): string {
    if (this.pos >= this.runes.length) {
      this.pos += 1;
      return EOF;
    }
    return this.runes[this.pos++] as string;
  }

  private unread(): void {
    this.pos -= 1;
  }

  private peek(): string {
    return this.pos >= this.runes.length ? EOF : (this.runes[this.pos] as string);
  }

  private fetchItem(): void {
    const r = this.read();
    if (r === EOF) this.tokens.push({ type: 'eof', raw: '' });
    else if (r === '{') {
      this.termsLevel += 1;
      this.tokens.push({ type: 'terms_open', raw: r });
    } else if (r === ',' && this.termsLevel > 0) this.tokens.push({ type: 'separator', raw: r });
    else if (r === '}' && this.termsLevel > 0) {
      this.tokens.push({ type: 'terms_close', raw: r });
      this.termsLevel -= 1;
    } else if (r === '[') {
      this.tokens.push({ type: 'range_open', raw: r });
      this.fetchRange();
    } else if (r === '?') this.tokens.push({ type: 'single', raw: r });
    else if (r === '*') {
      if (this.read() === '*') this.tokens.push({ type: 'super', raw: '**' });
      else {
        this.unread();
        this.tokens.push({ type: 'any', raw: r });
      }
    } else {
      this.unread();
      this.fetchText(this.termsLevel > 0 ? IN_TERMS_BREAKERS : IN_TEXT_BREAKERS);
    }
  }

  private fetchRange(): void {
    let wantHi = false;
    let wantClose = false;
    let seenNot = false;
    for (;;) {
      const r = this.read();
      if (r === EOF) {
        this.err = 'unexpected end of input';
        return;
      }
      if (wantClose) {
        if (r !== ']') this.err = 'expected close range character';
        else this.tokens.push({ type: 'range_close', raw: r });
        return;
      }
      if (wantHi) {
        this.tokens.push({ type: 'range_hi', raw: r });
        wantClose = true;
        continue;
      }
      if (!seenNot && r === '!') {
        this.tokens.push({ type: 'not', raw: r });
        seenNot = true;
        continue;
      }
      if (this.peek() === '-') {
        this.pos += 1;
        this.tokens.push({ type: 'range_lo', raw: r }, { type: 'range_between', raw: '-' });
        wantHi = true;
        continue;
      }
      this.unread();
      this.fetchText([']']);
      wantClose = true;
    }
  }

  private fetchText(breakers: string[]): void {
    let data = '';
    let escaped = false;
    for (;;) {
      const r = this.read();
      if (r === EOF) break;
      if (!escaped) {
        if (r === '\\') {
          escaped = true;
          continue;
        }
        if (breakers.includes(r)) {
          this.unread();
          break;
        }
      }
      escaped = false;
      data += r;
    }
    if (data.length > 0) this.tokens.push({ type: 'text', raw: data });
  }
}
