/**
 * Values as the sandbox's codec writes them (python/crucible_sandbox/codec.py): JSON with tags
 * for what JSON cannot say. Decided by exact Python types, so overriding `__eq__` changes
 * nothing. Values that reach Node carry no references or handles (those stay between Python
 * processes); a plain JSON number with a fraction is a float, a whole float is `$float`.
 */
export type Tagged =
  | null
  | boolean
  | number
  | string
  | Tagged[]
  | { $tuple: Tagged[] }
  | { $int: string }
  | { $float: string }
  | { $dict: Array<[Tagged, Tagged]> }
  | { $odict: Array<[Tagged, Tagged]> }
  | { $counter: Array<[Tagged, Tagged]> }
  | { $ddict: Array<[Tagged, Tagged]>; factory: Tagged }
  | { $set: Tagged[] }
  | { $frozenset: Tagged[] }
  | { $deque: Tagged[]; maxlen: number | null }
  | { $bytes: string }
  | { $bytearray: string }
  | { $complex: [Tagged, Tagged] }
  | { $decimal: string }
  | { $fraction: [Tagged, Tagged] }
  | { $range: [Tagged, Tagged, Tagged] }
  | { $builtin: string }
  | { $repr: string; $type?: string };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A JSON value from a test file (expected outputs, arguments) as a tagged value. A whole float
 * written `3.0` reaches here as `{ $float: "3.0" }` (see lossless-json.ts) and stays a float; an
 * integer past 2^53 as a BigInt or `{ $int: "digits" }`. (A dict whose one key is `$float` or
 * `$int` is read the same way: such a test value cannot be told from these.) */
export function fromJson(v: unknown): Tagged {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (isObj(v) && Object.keys(v).length === 1 && typeof v.$float === 'string' && FLOAT_TEXT.test(v.$float)) return { $float: v.$float };
  // An integer past 2^53 kept as digits by parseJsonValues (a dataset's call test).
  if (isObj(v) && Object.keys(v).length === 1 && typeof v.$int === 'string' && INT_TEXT.test(v.$int)) {
    const n = Number(v.$int);
    return Number.isSafeInteger(n) ? n : { $int: BigInt(v.$int).toString() };
  }
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) && BigInt(Number(v)) === v ? Number(v) : { $int: v.toString() };
  if (typeof v === 'number') {
    // A whole number past 2^53 was an integer literal JSON.parse rounded: an int, as Python reads it.
    if (Number.isInteger(v) && !Number.isSafeInteger(v)) return { $int: BigInt(v).toString() };
    if (Number.isFinite(v)) return v;
    return { $float: Number.isNaN(v) ? 'nan' : v > 0 ? 'inf' : '-inf' };
  }
  if (Array.isArray(v)) return v.map(fromJson);
  if (isObj(v)) return { $dict: Object.entries(v).map(([k, x]) => [k, fromJson(x)] as [Tagged, Tagged]) };
  return { $repr: String(v) };
}

const INT_TEXT = /^-?\d+$/;
/** Python's repr of a float: digits, or nan / inf / -inf. */
const FLOAT_TEXT = /^(?:-?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|inf)|nan)$/;
const B64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MAX_DEPTH = 410;
const SEQ_TAGS = new Set(['$tuple', '$set', '$frozenset']);
const MAP_TAGS = new Set(['$dict', '$odict', '$counter']);
const pairsOk = (x: unknown, depth: number): boolean =>
  Array.isArray(x) && x.every((p) => Array.isArray(p) && p.length === 2 && isTagged(p[0], depth + 1) && isTagged(p[1], depth + 1));

/** The tagged-value grammar, checked: anything else a fork-server forwards is malformed (the
 * program's result record was forged or broken) and is answered as the program's
 * runtime_error. Plain numbers must be finite (big integers come as `$int`). */
export function isTagged(v: unknown, depth = 0): v is Tagged {
  if (depth > MAX_DEPTH) return false;
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return true;
  // Finite: NaN and the infinities come tagged. (A float such as 1e20 is a whole number here;
  // integers past 2^53 written without $int are refused where the record is parsed.)
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) return v.every((x) => isTagged(x, depth + 1));
  if (!isObj(v)) return false;
  const keys = Object.keys(v).sort();
  const k = keys[0]!;
  const x = v[k];
  if (keys.length === 1) {
    if (SEQ_TAGS.has(k)) return Array.isArray(x) && x.every((y) => isTagged(y, depth + 1));
    if (MAP_TAGS.has(k)) return pairsOk(x, depth);
    if (k === '$int') return typeof x === 'string' && INT_TEXT.test(x);
    if (k === '$float' || k === '$decimal') return typeof x === 'string' && x.length <= 10_000 && (k === '$decimal' || FLOAT_TEXT.test(x));
    if (k === '$bytes' || k === '$bytearray') return typeof x === 'string' && B64.test(x);
    if (k === '$complex' || k === '$fraction') return Array.isArray(x) && x.length === 2 && x.every((y) => isTagged(y, depth + 1));
    if (k === '$range') return Array.isArray(x) && x.length === 3 && x.every((y) => isTagged(y, depth + 1));
    if (k === '$builtin' || k === '$repr') return typeof x === 'string';
    return false;
  }
  if (keys.length === 2 && keys[0] === '$ddict' && keys[1] === 'factory') return pairsOk(v.$ddict, depth) && isTagged(v.factory, depth + 1);
  if (keys.length === 2 && keys[0] === '$deque' && keys[1] === 'maxlen') {
    return Array.isArray(v.$deque) && v.$deque.every((y) => isTagged(y, depth + 1)) && (v.maxlen === null || Number.isInteger(v.maxlen));
  }
  return keys.length === 2 && keys[0] === '$repr' && keys[1] === '$type' && typeof v.$repr === 'string' && typeof v.$type === 'string';
}

/** The same value with its containers' tags folded into the plain kinds comparisons use:
 * frozensets are sets, ordered/counting/default dicts are dicts, deques are lists (Python's
 * `==` says the same), bytes and bytearrays alike. */
export function normalize(v: Tagged): Tagged {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(normalize);
  if ('$tuple' in v) return { $tuple: v.$tuple.map(normalize) };
  if ('$set' in v) return { $set: v.$set.map(normalize) };
  if ('$frozenset' in v) return { $set: v.$frozenset.map(normalize) };
  if ('$deque' in v) return v.$deque.map(normalize);
  for (const t of ['$dict', '$odict', '$counter', '$ddict'] as const) {
    if (t in v)
      return { $dict: ((v as Record<string, unknown>)[t] as Array<[Tagged, Tagged]>).map(([a, b]) => [normalize(a), normalize(b)] as [Tagged, Tagged]) };
  }
  if ('$bytearray' in v) return { $bytes: v.$bytearray };
  return v;
}

/** Back to plain JSON for reports: tuples and sets become arrays, big ints strings, whole
 * floats numbers. */
export function toJson(v: Tagged): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(toJson);
  if ('$tuple' in v) return v.$tuple.map(toJson);
  if ('$set' in v) return v.$set.map(toJson);
  if ('$frozenset' in v) return v.$frozenset.map(toJson);
  if ('$deque' in v) return v.$deque.map(toJson);
  if ('$int' in v) return v.$int;
  if ('$float' in v) return Number.isFinite(Number(v.$float)) ? Number(v.$float) : v.$float;
  for (const t of ['$dict', '$odict', '$counter', '$ddict'] as const) {
    if (t in v) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of (v as Record<string, unknown>)[t] as Array<[Tagged, Tagged]>) out[typeof k === 'string' ? k : JSON.stringify(toJson(k))] = toJson(x);
      return out;
    }
  }
  if ('$decimal' in v) return v.$decimal;
  if ('$repr' in v) return v.$repr;
  return JSON.stringify(v);
}

type Num = { kind: 'int'; v: bigint } | { kind: 'float'; v: number };

/** Numeric view of a value (bool counts, as in Python), or undefined when not a number. */
export function asNumber(v: Tagged): Num | undefined {
  if (typeof v === 'boolean') return { kind: 'int', v: v ? 1n : 0n };
  if (typeof v === 'number') return Number.isInteger(v) ? { kind: 'int', v: BigInt(v) } : { kind: 'float', v };
  if (isObj(v) && '$int' in v) return { kind: 'int', v: BigInt(v.$int as string) };
  if (isObj(v) && '$float' in v) {
    const s = v.$float as string;
    return { kind: 'float', v: s === 'nan' ? NaN : s === 'inf' ? Infinity : s === '-inf' ? -Infinity : Number(s) };
  }
  return undefined;
}

function numEqual(a: Num, b: Num, tol: number): boolean {
  if (a.kind === 'int' && b.kind === 'int') return a.v === b.v;
  const x = Number(a.v);
  const y = Number(b.v);
  if (x === y) return true;
  if (tol <= 0 || !Number.isFinite(x) || !Number.isFinite(y)) return false;
  return Math.abs(x - y) <= tol * Math.max(1, Math.abs(y));
}

const kindOf = (v: Tagged): string => {
  if (v === null) return 'none';
  if (Array.isArray(v)) return 'list';
  if (typeof v !== 'object') return typeof v;
  return Object.keys(v)[0] ?? 'object';
};

export interface EqualOptions {
  /** Python semantics: a tuple is not a list, a set is not a list. Off: JSON-shaped data. */
  strictContainers: boolean;
  /** Relative/absolute tolerance for floats; 0 means exact. */
  tolerance: number;
}

/** Deep equality of serialized values, computed here and never by the candidate's objects. */
export function valuesEqual(a0: Tagged, b0: Tagged, opt: EqualOptions): boolean {
  const a = normalize(a0);
  const b = normalize(b0);
  const na = asNumber(a);
  const nb = asNumber(b);
  if (na && nb) {
    // Python: True == 1; JSON-shaped expectations: a boolean must stay a boolean.
    if (!opt.strictContainers && (typeof a === 'boolean') !== (typeof b === 'boolean')) return false;
    return numEqual(na, nb, opt.tolerance);
  }
  if (na || nb) return false;
  if (typeof a === 'string' || typeof b === 'string') return a === b;
  if (a === null || b === null) return a === b;
  const ka = kindOf(a);
  const kb = kindOf(b);
  const seq = (v: Tagged): Tagged[] | undefined => (Array.isArray(v) ? v : isObj(v) && '$tuple' in v ? (v.$tuple as Tagged[]) : undefined);
  const sa = seq(a);
  const sb = seq(b);
  if (sa && sb) {
    if (opt.strictContainers && ka !== kb) return false;
    return sa.length === sb.length && sa.every((x, i) => valuesEqual(x, sb[i]!, opt));
  }
  const bag = (v: Tagged): Tagged[] | undefined => (isObj(v) && '$set' in v ? (v.$set as Tagged[]) : undefined);
  const ba = bag(a);
  const bb = bag(b);
  if (ba && bb) return unorderedEqual(ba, bb, opt);
  if (!opt.strictContainers && ba && Array.isArray(b)) return setEqualsSortedList(ba, b, opt);
  if (!opt.strictContainers && bb && Array.isArray(a)) return setEqualsSortedList(bb, a, opt);
  const dict = (v: Tagged): Array<[Tagged, Tagged]> | undefined => (isObj(v) && '$dict' in v ? (v.$dict as Array<[Tagged, Tagged]>) : undefined);
  const da = dict(a);
  const db = dict(b);
  if (da && db) {
    if (da.length !== db.length) return false;
    // JSON object keys are always strings: compare keys by their text unless strict.
    const key = (k: Tagged) => (opt.strictContainers ? JSON.stringify(k) : typeof k === 'string' ? k : JSON.stringify(toJson(k)));
    const m = new Map(db.map(([k, v]) => [key(k), v] as const));
    return da.every(([k, v]) => m.has(key(k)) && valuesEqual(v, m.get(key(k))!, opt));
  }
  // Opaque objects ($repr) never equal anything: their class could claim any equality.
  return false;
}

/** A canonical text of a value: equal texts for values Python calls equal (1, 1.0 and True
 * alike; tuples and lists alike unless strict), so sets compare by sorting, O(n log n). */
export function canonicalKey(v: Tagged, strict: boolean): string {
  const n = asNumber(v);
  if (n) {
    if (n.kind === 'int') return `n${n.v.toString()}`;
    if (Number.isNaN(n.v)) return 'nan';
    if (Number.isInteger(n.v)) return `n${BigInt(n.v).toString()}`;
    return `n${String(n.v)}`;
  }
  if (v === null) return 'none';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return `${strict ? 'l' : 's'}[${v.map((x) => canonicalKey(x, strict)).join(',')}]`;
  if ('$tuple' in v) return `${strict ? 't' : 's'}[${v.$tuple.map((x) => canonicalKey(x, strict)).join(',')}]`;
  if ('$set' in v)
    return `{${v.$set
      .map((x) => canonicalKey(x, strict))
      .sort()
      .join(',')}}`;
  if ('$dict' in v) {
    return `d{${v.$dict
      .map(([k, x]) => `${canonicalKey(k, strict)}:${canonicalKey(x, strict)}`)
      .sort()
      .join(',')}}`;
  }
  // Opaque values are unique: no other value's key can match.
  return `o${Math.random()}`;
}

/** Set against set: the same elements, by canonical keys (sorting, not an O(n^2) match). */
function unorderedEqual(a: Tagged[], b: Tagged[], opt: EqualOptions): boolean {
  if (a.length !== b.length) return false;
  const ka = a.map((x) => canonicalKey(x, opt.strictContainers)).sort();
  const kb = b.map((x) => canonicalKey(x, opt.strictContainers)).sort();
  return ka.every((k, i) => k === kb[i]);
}

/** Order of a set's elements when it is written as a list: numbers by value, strings by code
 * units, anything else by canonical key, kinds in that order. */
function canonicalCompare(x: Tagged, y: Tagged): number {
  const nx = asNumber(x);
  const ny = asNumber(y);
  if (nx && ny) {
    const a = nx.kind === 'int' && ny.kind === 'int' ? nx.v : Number(nx.v);
    const b = nx.kind === 'int' && ny.kind === 'int' ? ny.v : Number(ny.v);
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (nx || ny) return nx ? -1 : 1;
  if (typeof x === 'string' && typeof y === 'string') return x < y ? -1 : x > y ? 1 : 0;
  if (typeof x === 'string' || typeof y === 'string') return typeof x === 'string' ? -1 : 1;
  const kx = canonicalKey(x, false);
  const ky = canonicalKey(y, false);
  return kx < ky ? -1 : kx > ky ? 1 : 0;
}

/** A returned set against an expected list (JSON has no sets): equal only when the list is the
 * set's elements in canonical sorted order. */
function setEqualsSortedList(set: Tagged[], list: Tagged[], opt: EqualOptions): boolean {
  if (set.length !== list.length) return false;
  const sorted = [...set].sort(canonicalCompare);
  return sorted.every((x, i) => valuesEqual(x, list[i]!, opt));
}
