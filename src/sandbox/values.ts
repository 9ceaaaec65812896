/**
 * Values as the fork-server serializes them (see python/forkserver.py `tag`): JSON with tags for
 * what JSON cannot say. Decided by exact Python types, so overriding `__eq__` changes nothing.
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
  | { $set: Tagged[] }
  | { $repr: string; $type?: string };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A JSON value from a test file (expected outputs, arguments) as a tagged value. */
export function fromJson(v: unknown): Tagged {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v === 'number') return v;
  if (Array.isArray(v)) return v.map(fromJson);
  if (isObj(v)) return { $dict: Object.entries(v).map(([k, x]) => [k, fromJson(x)] as [Tagged, Tagged]) };
  return { $repr: String(v) };
}

/** Back to plain JSON for reports: tuples and sets become arrays, big ints strings. */
export function toJson(v: Tagged): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(toJson);
  if ('$tuple' in v) return v.$tuple.map(toJson);
  if ('$set' in v) return v.$set.map(toJson);
  if ('$int' in v) return v.$int;
  if ('$float' in v) return v.$float;
  if ('$dict' in v) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v.$dict) out[typeof k === 'string' ? k : JSON.stringify(toJson(k))] = toJson(x);
    return out;
  }
  return v.$repr;
}

type Num = { kind: 'int'; v: bigint } | { kind: 'float'; v: number };

/** Numeric view of a value (bool counts, as in Python), or undefined when not a number. */
export function asNumber(v: Tagged): Num | undefined {
  if (typeof v === 'boolean') return { kind: 'int', v: v ? 1n : 0n };
  if (typeof v === 'number') return Number.isInteger(v) ? { kind: 'int', v: BigInt(v) } : { kind: 'float', v };
  if (isObj(v) && '$int' in v) return { kind: 'int', v: BigInt(v.$int as string) };
  if (isObj(v) && '$float' in v) {
    const s = v.$float as string;
    return { kind: 'float', v: s === 'nan' ? NaN : s.startsWith('-') ? -Infinity : Infinity };
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
export function valuesEqual(a: Tagged, b: Tagged, opt: EqualOptions): boolean {
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
  const seq = (v: Tagged): Tagged[] | undefined =>
    Array.isArray(v) ? v : isObj(v) && '$tuple' in v ? (v.$tuple as Tagged[]) : undefined;
  const sa = seq(a);
  const sb = seq(b);
  if (sa && sb) {
    if (opt.strictContainers && ka !== kb) return false;
    return sa.length === sb.length && sa.every((x, i) => valuesEqual(x, sb[i]!, opt));
  }
  const bag = (v: Tagged): Tagged[] | undefined => (isObj(v) && '$set' in v ? (v.$set as Tagged[]) : undefined);
  const ba = bag(a) ?? (!opt.strictContainers && kb === '$set' ? sa : undefined);
  const bb = bag(b) ?? (!opt.strictContainers && ka === '$set' ? sb : undefined);
  if (ba && bb) return unorderedEqual(ba, bb, opt);
  const dict = (v: Tagged): Array<[Tagged, Tagged]> | undefined =>
    isObj(v) && '$dict' in v ? (v.$dict as Array<[Tagged, Tagged]>) : undefined;
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

function unorderedEqual(a: Tagged[], b: Tagged[], opt: EqualOptions): boolean {
  if (a.length !== b.length) return false;
  const used = new Array<boolean>(b.length).fill(false);
  for (const x of a) {
    const j = b.findIndex((y, i) => !used[i] && valuesEqual(x, y, opt));
    if (j < 0) return false;
    used[j] = true;
  }
  return true;
}
