/**
 * Python literals (as models write them in tests: numbers, strings, True/False/None, lists,
 * tuples, dicts) read into JSON values, so `assert f([1, 2], 'a') == (3, None)` becomes a call
 * test. Tuples become arrays, as the sandbox compares serialized values. Anything else (names,
 * calls, expressions) is refused with the offset where reading stopped.
 */

export class PyLiteralError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} at offset ${offset}`);
    this.name = 'PyLiteralError';
  }
}

class Reader {
  i = 0;
  constructor(readonly s: string) {}

  ws(): void {
    while (this.i < this.s.length && /\s/.test(this.s[this.i]!)) this.i++;
  }

  peek(): string {
    this.ws();
    return this.s[this.i] ?? '';
  }

  eat(ch: string): boolean {
    if (this.peek() !== ch) return false;
    this.i++;
    return true;
  }

  value(): unknown {
    const c = this.peek();
    if (c === '[') return this.seq('[', ']');
    if (c === '(') {
      const items = this.seq('(', ')');
      return items;
    }
    if (c === '{') return this.dict();
    if (c === '"' || c === "'") return this.str();
    if (c === '-' || c === '+' || c === '.' || /[0-9]/.test(c)) return this.num();
    for (const [word, v] of [
      ['True', true],
      ['False', false],
      ['None', null],
    ] as const) {
      if (this.s.startsWith(word, this.i) && !/[\w]/.test(this.s[this.i + word.length] ?? '')) {
        this.i += word.length;
        return v;
      }
    }
    throw new PyLiteralError(`not a literal: ${JSON.stringify(this.s.slice(this.i, this.i + 20))}`, this.i);
  }

  /** Comma-separated values up to `close` (a trailing comma allowed). */
  items(close: string): unknown[] {
    const out: unknown[] = [];
    while (!this.eat(close)) {
      out.push(this.value());
      if (this.eat(close)) break;
      if (!this.eat(',')) throw new PyLiteralError(`expected , or ${close}`, this.i);
    }
    return out;
  }

  seq(open: string, close: string): unknown[] {
    this.eat(open);
    return this.items(close);
  }

  dict(): Record<string, unknown> {
    this.eat('{');
    const out: Record<string, unknown> = {};
    while (!this.eat('}')) {
      const at = this.i;
      const k = this.value();
      // JSON objects have string keys; a model's {1: 'a'} has no JSON twin.
      if (typeof k !== 'string') throw new PyLiteralError('dict key is not a string', at);
      if (!this.eat(':')) throw new PyLiteralError('expected :', this.i);
      out[k] = this.value();
      if (this.eat('}')) break;
      if (!this.eat(',')) throw new PyLiteralError('expected , or }', this.i);
    }
    return out;
  }

  str(): string {
    const q = this.s[this.i]!;
    const start = this.i;
    this.i++;
    let out = '';
    const escapes: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '0': '\0' };
    while (this.i < this.s.length) {
      const ch = this.s[this.i++]!;
      if (ch === q) return out;
      if (ch === '\n') break;
      if (ch === '\\') {
        const e = this.s[this.i++] ?? '';
        if (!(e in escapes)) throw new PyLiteralError(`unsupported escape \\${e}`, this.i - 2);
        out += escapes[e];
      } else out += ch;
    }
    throw new PyLiteralError('unterminated string', start);
  }

  num(): number {
    const m = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?/.exec(this.s.slice(this.i));
    if (!m) throw new PyLiteralError('not a number', this.i);
    this.i += m[0].length;
    return Number(m[0]);
  }
}

/** One literal filling the whole text. */
export function parsePyLiteral(text: string): unknown {
  const r = new Reader(text);
  const v = r.value();
  r.ws();
  if (r.i !== text.length) throw new PyLiteralError(`unexpected ${JSON.stringify(text.slice(r.i, r.i + 20))} after the value`, r.i);
  return v;
}

/** A parenthesized argument list, `(1, 'a', [2])` with the parentheses included. */
export function parsePyArgs(text: string): unknown[] {
  const r = new Reader(text);
  if (!r.eat('(')) throw new PyLiteralError('expected (', r.i);
  const args = r.items(')');
  r.ws();
  if (r.i !== text.length) throw new PyLiteralError(`unexpected ${JSON.stringify(text.slice(r.i, r.i + 20))} after the arguments`, r.i);
  return args;
}
