/**
 * JSON parsing that keeps Python's meaning of numbers: an integer literal outside the safe
 * range becomes a BigInt instead of a rounded number (JSON.parse would accept a wrong answer of
 * 2^53 + 1 as equal to 2^53), and a float literal whose value is whole (`3.0`, `1e5`) becomes
 * `{ $float: "3.0" }`, the codec's float, instead of the number 3 that Python would read as
 * an int. Text with neither is handed to JSON.parse unchanged.
 */

const LONG_DIGITS = /\d{16}/;
const WHOLE_FLOAT = /\d[.eE]/;

export function parseJsonLossless(text: string): unknown {
  if (!LONG_DIGITS.test(text) && !WHOLE_FLOAT.test(text)) return JSON.parse(text);
  const p = new Parser(text);
  p.ws();
  const v = p.value(0);
  p.ws();
  if (p.i !== text.length) p.fail('unexpected text after the value');
  return v;
}

const MAX_DEPTH = 10_000;
const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(what: string): never {
    throw new SyntaxError(`${what} at position ${this.i}`);
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      this.i++;
    }
  }

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) this.fail('nested too deeply');
    const c = this.s[this.i];
    if (c === '{') {
      this.i++;
      const out: Record<string, unknown> = {};
      this.ws();
      if (this.s[this.i] === '}') {
        this.i++;
        return out;
      }
      for (;;) {
        this.ws();
        if (this.s[this.i] !== '"') this.fail('expected a string key');
        const k = this.string();
        this.ws();
        if (this.s[this.i] !== ':') this.fail("expected ':'");
        this.i++;
        this.ws();
        Object.defineProperty(out, k, { value: this.value(depth + 1), enumerable: true, writable: true, configurable: true });
        this.ws();
        if (this.s[this.i] === ',') {
          this.i++;
          continue;
        }
        if (this.s[this.i] === '}') {
          this.i++;
          return out;
        }
        this.fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      this.i++;
      const out: unknown[] = [];
      this.ws();
      if (this.s[this.i] === ']') {
        this.i++;
        return out;
      }
      for (;;) {
        this.ws();
        out.push(this.value(depth + 1));
        this.ws();
        if (this.s[this.i] === ',') {
          this.i++;
          continue;
        }
        if (this.s[this.i] === ']') {
          this.i++;
          return out;
        }
        this.fail("expected ',' or ']'");
      }
    }
    if (c === '"') return this.string();
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.s);
    if (!m) this.fail('unexpected character');
    this.i += m[0].length;
    if (m[1] === undefined && m[2] === undefined) {
      const n = Number(m[0]);
      return Number.isSafeInteger(n) ? n : BigInt(m[0]);
    }
    const f = Number(m[0]);
    return Number.isInteger(f) || !Number.isFinite(f) ? { $float: String(m[0]) } : f;
  }

  string(): string {
    // The literal's extent, then JSON.parse of just that literal for its escapes.
    const s = this.s;
    let j = this.i + 1;
    while (j < s.length) {
      const c = s.charCodeAt(j);
      if (c === 0x22) break;
      if (c === 0x5c) j++;
      j++;
    }
    if (j >= s.length) this.fail('unterminated string');
    const out = JSON.parse(s.slice(this.i, j + 1)) as string;
    this.i = j + 1;
    return out;
  }
}

/** parseJsonLossless for values that are kept and sent on as JSON (a dataset's call tests, held
 * in problem records and events): an integer past 2^53 becomes the codec's `{ $int: "digits" }`
 * instead of a BigInt, which JSON cannot hold. A whole float stays `{ $float }`. */
export function parseJsonValues(text: string): unknown {
  return jsonSafe(parseJsonLossless(text));
}

function jsonSafe(v: unknown): unknown {
  if (typeof v === 'bigint') return { $int: v.toString() };
  if (Array.isArray(v)) return v.map(jsonSafe);
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) Object.defineProperty(out, k, { value: jsonSafe(x), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}
