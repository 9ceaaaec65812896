/**
 * A restricted pickle reader: it interprets only the opcodes that build plain data (str, bytes,
 * list, tuple, dict, int, float, bool, None) and refuses every opcode that could import a name
 * or call anything (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID...).
 * It never runs pickle code: there is nothing in it that could.
 *
 * Used for LiveCodeBench's private tests, stored as base64(zlib(pickle.dumps(json_string))).
 */
import { inflateSync } from 'node:zlib';

/** What a restricted pickle can hold. Tuples come back as arrays; dict keys as strings. */
export type PickleValue = null | boolean | number | bigint | string | Uint8Array | PickleValue[] | { [key: string]: PickleValue };

export class PickleError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} (at byte ${offset})`);
    this.name = 'PickleError';
  }
}

/** Opcodes that would import or call Python code; named so the refusal says which one. */
const FORBIDDEN: Record<number, string> = {
  0x63: 'GLOBAL',
  0x93: 'STACK_GLOBAL',
  0x52: 'REDUCE',
  0x62: 'BUILD',
  0x69: 'INST',
  0x6f: 'OBJ',
  0x81: 'NEWOBJ',
  0x92: 'NEWOBJ_EX',
  0x82: 'EXT1',
  0x83: 'EXT2',
  0x84: 'EXT4',
  0x50: 'PERSID',
  0x51: 'BINPERSID',
  0x97: 'NEXT_BUFFER',
  0x98: 'READONLY_BUFFER',
};

const MARK = Symbol('mark');
type Slot = PickleValue | typeof MARK;

class Reader {
  pos = 0;
  private readonly view: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  need(n: number | bigint): number {
    const len = Number(n);
    if (!Number.isSafeInteger(len) || len < 0 || this.pos + len > this.bytes.length) {
      throw new PickleError(`truncated pickle: ${String(n)} bytes wanted, ${this.bytes.length - this.pos} left`, this.pos);
    }
    return len;
  }
  u8(): number {
    this.need(1);
    return this.bytes[this.pos++]!;
  }
  u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.pos, true);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  i32(): number {
    this.need(4);
    const v = this.view.getInt32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(): bigint {
    this.need(8);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  f64be(): number {
    this.need(8);
    const v = this.view.getFloat64(this.pos, false);
    this.pos += 8;
    return v;
  }
  take(n: number | bigint): Uint8Array {
    const len = this.need(n);
    const out = this.bytes.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }
  /** A newline-terminated ASCII argument (protocol 0 opcodes). */
  line(): string {
    const end = this.bytes.indexOf(0x0a, this.pos);
    if (end < 0) throw new PickleError('truncated pickle: missing end of line', this.pos);
    const text = Buffer.from(this.bytes.subarray(this.pos, end)).toString('latin1');
    this.pos = end + 1;
    return text;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Two's-complement little-endian integer of any length (LONG1 / LONG4). */
function decodeLong(bytes: Uint8Array): number | bigint {
  if (bytes.length === 0) return 0;
  let v = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[i]!);
  if (bytes[bytes.length - 1]! & 0x80) v -= 1n << BigInt(bytes.length * 8);
  return narrow(v);
}

const narrow = (v: bigint): number | bigint => (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v);

/** Python's raw-unicode-escape (UNICODE opcode): only \uXXXX and \UXXXXXXXX are escapes. */
function rawUnicodeEscape(text: string): string {
  return text.replace(/\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})/g, (_, u4: string, u8: string) => String.fromCodePoint(parseInt(u4 ?? u8, 16)));
}

/** Protocol 0 STRING argument: a Python repr of a byte string, quoted. */
function unquotePy2String(arg: string, offset: number): string {
  const q = arg[0];
  if ((q !== "'" && q !== '"') || arg.length < 2 || arg[arg.length - 1] !== q) {
    throw new PickleError('STRING argument is not quoted', offset);
  }
  const body = arg.slice(1, -1);
  const simple: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '0': '\0' };
  return body.replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_, e: string) =>
    e.startsWith('x') && e.length === 3 ? String.fromCharCode(parseInt(e.slice(1), 16)) : (simple[e] ?? `\\${e}`),
  );
}

function dictKey(key: PickleValue, offset: number): string {
  if (typeof key === 'string') return key;
  if (key === null || typeof key === 'number' || typeof key === 'bigint' || typeof key === 'boolean') {
    // Same rule as Python's json.dumps for non-string keys.
    return key === null ? 'null' : String(key);
  }
  throw new PickleError('dict key must be a str, int, float, bool or None', offset);
}

function makeDict(items: PickleValue[], offset: number, into?: { [key: string]: PickleValue }) {
  if (items.length % 2 !== 0) throw new PickleError('odd number of items for a dict', offset);
  const dict = into ?? (Object.create(null) as { [key: string]: PickleValue });
  for (let i = 0; i < items.length; i += 2) dict[dictKey(items[i]!, offset)] = items[i + 1]!;
  return dict;
}

const isDict = (v: Slot | undefined): v is { [key: string]: PickleValue } =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);

/** Decodes one pickle (protocols 0-5) holding plain data only; throws PickleError otherwise. */
export function unpickle(bytes: Uint8Array): PickleValue {
  const r = new Reader(bytes);
  const stack: Slot[] = [];
  const marks: number[] = [];
  const memo = new Map<number, PickleValue>();

  const pop = (at: number): PickleValue => {
    const v = stack.pop();
    if (v === undefined || v === MARK) throw new PickleError('stack underflow', at);
    return v;
  };
  const top = (at: number): PickleValue => {
    const v = stack[stack.length - 1];
    if (v === undefined || v === MARK) throw new PickleError('stack underflow', at);
    return v;
  };
  const popMark = (at: number): PickleValue[] => {
    const m = marks.pop();
    if (m === undefined) throw new PickleError('no MARK on the stack', at);
    const items = stack.splice(m) as Slot[];
    items.shift(); // the MARK itself
    if (items.some((x) => x === MARK)) throw new PickleError('nested MARK', at);
    return items as PickleValue[];
  };
  const push = (v: PickleValue) => stack.push(v);
  const memoGet = (key: number, at: number): PickleValue => {
    if (!memo.has(key)) throw new PickleError(`memo key ${key} not defined`, at);
    return memo.get(key)!;
  };
  const text = (b: Uint8Array, at: number): string => {
    try {
      return utf8.decode(b);
    } catch {
      throw new PickleError('string is not valid UTF-8', at);
    }
  };

  for (;;) {
    const at = r.pos;
    const op = r.u8();
    const forbidden = FORBIDDEN[op];
    if (forbidden) {
      throw new PickleError(
        `pickle opcode ${forbidden} (0x${op.toString(16)}) is not allowed: this decoder reads plain data only and never imports or calls anything`,
        at,
      );
    }
    switch (op) {
      case 0x80: // PROTO
        if (r.u8() > 5) throw new PickleError('unsupported pickle protocol', at);
        break;
      case 0x95: // FRAME: a length hint only
        r.u64();
        break;
      case 0x2e: {
        // STOP
        if (stack.length !== 1 || marks.length !== 0) throw new PickleError('malformed pickle: stack not empty at STOP', at);
        return pop(at);
      }
      case 0x28: // MARK
        marks.push(stack.length);
        stack.push(MARK);
        break;
      case 0x30: // POP
        if (stack[stack.length - 1] === MARK) popMark(at);
        else pop(at);
        break;
      case 0x31: // POP_MARK
        popMark(at);
        break;
      case 0x32: // DUP
        push(top(at));
        break;
      case 0x4e: // NONE
        push(null);
        break;
      case 0x88: // NEWTRUE
        push(true);
        break;
      case 0x89: // NEWFALSE
        push(false);
        break;
      case 0x49: {
        // INT (text); protocol 0 writes bools as I01 / I00
        const arg = r.line();
        if (arg === '01') push(true);
        else if (arg === '00') push(false);
        else if (/^[+-]?\d+$/.test(arg)) push(narrow(BigInt(arg)));
        else throw new PickleError(`bad INT argument ${JSON.stringify(arg)}`, at);
        break;
      }
      case 0x4c: {
        // LONG (text, optional trailing L)
        const arg = r.line().replace(/L$/, '');
        if (!/^[+-]?\d+$/.test(arg)) throw new PickleError(`bad LONG argument ${JSON.stringify(arg)}`, at);
        push(narrow(BigInt(arg)));
        break;
      }
      case 0x4a: // BININT
        push(r.i32());
        break;
      case 0x4b: // BININT1
        push(r.u8());
        break;
      case 0x4d: // BININT2
        push(r.u16());
        break;
      case 0x8a: // LONG1
        push(decodeLong(r.take(r.u8())));
        break;
      case 0x8b: {
        // LONG4
        const n = r.i32();
        if (n < 0) throw new PickleError('negative LONG4 length', at);
        push(decodeLong(r.take(n)));
        break;
      }
      case 0x46: {
        // FLOAT (text)
        const arg = r.line();
        const v = Number(arg === 'nan' ? NaN : arg === 'inf' ? Infinity : arg === '-inf' ? -Infinity : arg);
        if (Number.isNaN(v) && arg !== 'nan') throw new PickleError(`bad FLOAT argument ${JSON.stringify(arg)}`, at);
        push(v);
        break;
      }
      case 0x47: // BINFLOAT
        push(r.f64be());
        break;
      case 0x56: // UNICODE (raw-unicode-escape: latin-1 bytes, \uXXXX above), newline-terminated
        push(rawUnicodeEscape(r.line()));
        break;
      case 0x58: // BINUNICODE
        push(text(r.take(r.u32()), at));
        break;
      case 0x8c: // SHORT_BINUNICODE
        push(text(r.take(r.u8()), at));
        break;
      case 0x8d: // BINUNICODE8
        push(text(r.take(r.u64()), at));
        break;
      case 0x53: // STRING (Python 2 str, quoted repr): read as text
        push(unquotePy2String(r.line(), at));
        break;
      case 0x54: {
        // BINSTRING
        const n = r.i32();
        if (n < 0) throw new PickleError('negative BINSTRING length', at);
        push(Buffer.from(r.take(n)).toString('latin1'));
        break;
      }
      case 0x55: // SHORT_BINSTRING
        push(Buffer.from(r.take(r.u8())).toString('latin1'));
        break;
      case 0x42: // BINBYTES
        push(Uint8Array.from(r.take(r.u32())));
        break;
      case 0x43: // SHORT_BINBYTES
        push(Uint8Array.from(r.take(r.u8())));
        break;
      case 0x8e: // BINBYTES8
      case 0x96: // BYTEARRAY8
        push(Uint8Array.from(r.take(r.u64())));
        break;
      case 0x5d: // EMPTY_LIST
        push([]);
        break;
      case 0x6c: // LIST
        push(popMark(at));
        break;
      case 0x61: {
        // APPEND
        const v = pop(at);
        const list = top(at);
        if (!Array.isArray(list)) throw new PickleError('APPEND to something that is not a list', at);
        list.push(v);
        break;
      }
      case 0x65: {
        // APPENDS
        const items = popMark(at);
        const list = top(at);
        if (!Array.isArray(list)) throw new PickleError('APPENDS to something that is not a list', at);
        for (const item of items) list.push(item);
        break;
      }
      case 0x29: // EMPTY_TUPLE
        push([]);
        break;
      case 0x74: // TUPLE
        push(popMark(at));
        break;
      case 0x85: // TUPLE1
        push([pop(at)]);
        break;
      case 0x86: {
        // TUPLE2
        const b = pop(at);
        push([pop(at), b]);
        break;
      }
      case 0x87: {
        // TUPLE3
        const c = pop(at);
        const b = pop(at);
        push([pop(at), b, c]);
        break;
      }
      case 0x7d: // EMPTY_DICT
        push(Object.create(null) as { [key: string]: PickleValue });
        break;
      case 0x64: // DICT
        push(makeDict(popMark(at), at));
        break;
      case 0x73: {
        // SETITEM
        const v = pop(at);
        const k = pop(at);
        const dict = top(at);
        if (!isDict(dict)) throw new PickleError('SETITEM on something that is not a dict', at);
        dict[dictKey(k, at)] = v;
        break;
      }
      case 0x75: {
        // SETITEMS
        const items = popMark(at);
        const dict = top(at);
        if (!isDict(dict)) throw new PickleError('SETITEMS on something that is not a dict', at);
        makeDict(items, at, dict);
        break;
      }
      case 0x70: {
        // PUT (text)
        const arg = r.line();
        if (!/^\d+$/.test(arg)) throw new PickleError(`bad PUT argument ${JSON.stringify(arg)}`, at);
        memo.set(Number(arg), top(at));
        break;
      }
      case 0x71: // BINPUT
        memo.set(r.u8(), top(at));
        break;
      case 0x72: // LONG_BINPUT
        memo.set(r.u32(), top(at));
        break;
      case 0x94: // MEMOIZE
        memo.set(memo.size, top(at));
        break;
      case 0x67: {
        // GET (text)
        const arg = r.line();
        if (!/^\d+$/.test(arg)) throw new PickleError(`bad GET argument ${JSON.stringify(arg)}`, at);
        push(memoGet(Number(arg), at));
        break;
      }
      case 0x68: // BINGET
        push(memoGet(r.u8(), at));
        break;
      case 0x6a: // LONG_BINGET
        push(memoGet(r.u32(), at));
        break;
      default:
        // Includes sets (EMPTY_SET, ADDITEMS, FROZENSET): not plain JSON-like data.
        throw new PickleError(`unknown or unsupported pickle opcode 0x${op.toString(16)}`, at);
    }
  }
}

/** Largest decompressed blob accepted: LiveCodeBench's biggest private test sets are tens of MB. */
export const MAX_INFLATED_BYTES = 1 << 30;

/** base64 -> zlib inflate -> restricted unpickle: LiveCodeBench's private_test_cases encoding. */
export function decodeBase64ZlibPickle(blob: string): PickleValue {
  const compressed = Buffer.from(blob.trim(), 'base64');
  if (compressed.length === 0) throw new PickleError('empty base64 blob', 0);
  let raw: Buffer;
  try {
    raw = inflateSync(compressed, { maxOutputLength: MAX_INFLATED_BYTES });
  } catch (err) {
    throw new PickleError(`not zlib data: ${(err as Error).message}`, 0);
  }
  return unpickle(raw);
}
