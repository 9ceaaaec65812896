/**
 * A lossless, denser stored form for event data whose bulk is lists: a list of objects with the
 * same keys is stored as columns (keys once), and a column of sha256 hashes, of ids that count
 * up (`.../t0/0`, `.../t0/1`, ...), of a few repeated values, or of integers in steps is stored
 * as one short value. `unpackJson(packJson(x))` gives x back with its keys in the same order.
 *
 * Markers are objects whose first key starts with `~`; an object of the data that has a key
 * starting with `~` is stored escaped (`{"~o": ...}`), so data can never be read as a marker.
 */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

const HEX64 = /^[0-9a-f]{64}$/;
const COUNTED = /^(.*?)(0|[1-9]\d*)$/;
const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);
const isPrimitive = (x: unknown): x is null | boolean | number | string => x === null || (typeof x !== 'object' && typeof x !== 'function');

/** Sha256 hashes (nulls allowed where at least one is a hash) as one base64 text. */
function hashColumn(values: readonly Json[]): Obj | null {
  let hashes = 0;
  const nulls: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null) nulls.push(i);
    else if (typeof v === 'string' && HEX64.test(v)) hashes++;
    else return null;
  }
  if (hashes === 0) return null;
  const bytes = Buffer.alloc(hashes * 32);
  let at = 0;
  for (const v of values) if (v !== null) bytes.write(v as string, at++ * 32, 'hex');
  return nulls.length > 0 ? { '~h': bytes.toString('base64'), '~z': nulls } : { '~h': bytes.toString('base64') };
}

/** Strings ending in a counter that goes up by one: [prefix, first, count] per run; a string
 * without a counter is a run of its own, [itself, null, 1]. */
function countedColumn(values: readonly Json[]): Obj | null {
  const runs: Json[] = [];
  let prefix: string | null = null;
  let next = -1;
  // Characters of the plain list and of the runs, roughly: worth it when the runs are shorter.
  let plain = 0;
  let packed = 0;
  for (const v of values) {
    if (typeof v !== 'string') return null;
    plain += v.length + 3;
    const m = COUNTED.exec(v);
    const n = m ? Number(m[2]) : NaN;
    if (!m || !Number.isSafeInteger(n) || String(n) !== m[2]) {
      runs.push(v, null, 1);
      packed += v.length + 10;
      prefix = null;
      continue;
    }
    if (m[1] === prefix && n === next) {
      runs[runs.length - 1] = (runs[runs.length - 1] as number) + 1;
    } else {
      prefix = m[1]!;
      runs.push(prefix, n, 1);
      packed += prefix.length + m[2]!.length + 8;
    }
    next = n + 1;
  }
  return packed * 4 <= plain * 3 ? { '~s': runs } : null;
}

/** Few distinct primitives: the distinct values and one base-36 digit per entry. */
function dictionaryColumn(values: readonly Json[]): Obj | null {
  if (values.length < 4) return null;
  const distinct: Json[] = [];
  let digits = '';
  for (const v of values) {
    if (!isPrimitive(v)) return null;
    let k = distinct.indexOf(v);
    if (k < 0) {
      if (distinct.length === DIGITS.length) return null;
      k = distinct.push(v) - 1;
    }
    digits += DIGITS[k];
  }
  if (distinct.length * 2 > values.length) return null;
  return distinct.length === 1 ? { '~k': distinct[0]!, '~n': values.length } : { '~d': distinct, '~i': digits };
}

/** Strings repeated in long runs (a request id per result): [value, count] per run. */
function repeatColumn(values: readonly Json[]): Obj | null {
  if (values.length < 4) return null;
  const runs: Json[] = [];
  for (let i = 0; i < values.length;) {
    const v = values[i];
    if (typeof v !== 'string') return null;
    let j = i + 1;
    while (j < values.length && values[j] === v) j++;
    runs.push(v, j - i);
    i = j;
  }
  return runs.length * 4 <= values.length ? { '~r': runs } : null;
}

/** Integers in arithmetic runs: [first, step, count] per run; a list of pairs (program index,
 * test index, ...) as the runs of its even and of its odd entries. */
function stepColumn(values: readonly Json[]): Obj | null {
  const runs = stepRuns(values);
  if (runs) return { '~a': runs };
  if (values.length % 2 !== 0) return null;
  const even = stepRuns(values.filter((_, i) => i % 2 === 0));
  const odd = even && stepRuns(values.filter((_, i) => i % 2 === 1));
  return odd ? { '~a2': [even!, odd] } : null;
}

function stepRuns(values: readonly Json[]): number[] | null {
  if (values.length < 4) return null;
  const runs: number[] = [];
  for (let i = 0; i < values.length;) {
    const a = values[i];
    if (typeof a !== 'number' || !Number.isSafeInteger(a)) return null;
    const b = values[i + 1];
    if (typeof b !== 'number' || !Number.isSafeInteger(b) || !Number.isSafeInteger(b - a)) {
      runs.push(a, 0, 1);
      i += 1;
      continue;
    }
    const step = b - a;
    let j = i + 2;
    while (j < values.length && values[j] === (values[j - 1] as number) + step && Number.isSafeInteger(values[j])) j++;
    runs.push(a, step, j - i);
    i = j;
  }
  return runs.length * 2 <= values.length ? runs : null;
}

/** Ids made of a fixed prefix and the start of another column's hash (`oracle/<hash[0:16]>`):
 * [prefix, that column, length]. */
function derivedColumn(columns: readonly Json[][], k: number): Obj | null {
  const values = columns[k]!;
  const v0 = values[0];
  // A column of hashes is never derived: it stays a source, so no two columns derive from each other.
  if (values.length < 2 || typeof v0 !== 'string' || HEX64.test(v0)) return null;
  for (let j = 0; j < columns.length; j++) {
    const h0 = columns[j]![0];
    if (j === k || typeof h0 !== 'string' || !HEX64.test(h0)) continue;
    const at = v0.indexOf(h0.slice(0, 8));
    if (at < 0) continue;
    const prefix = v0.slice(0, at);
    const length = v0.length - at;
    if (length > 64) continue;
    const source = columns[j]!;
    let all = true;
    for (let i = 0; i < values.length && all; i++) {
      const h = source[i];
      all = typeof h === 'string' && HEX64.test(h) && values[i] === prefix + h.slice(0, length);
    }
    if (all) return { '~p': [prefix, j, length] };
  }
  return null;
}

/** The same keys in the same order in every element, none of them a marker's. */
function tableKeys(values: readonly Json[]): string[] | null {
  if (values.length < 2 || !isObj(values[0])) return null;
  const keys = Object.keys(values[0]);
  if (keys.length === 0 || keys.some((k) => k.startsWith('~'))) return null;
  for (let i = 1; i < values.length; i++) {
    const o = values[i];
    if (!isObj(o)) return null;
    let j = 0;
    for (const k in o) if (keys[j++] !== k) return null;
    if (j !== keys.length) return null;
  }
  return keys;
}

function packArray(values: readonly Json[]): Json {
  if (values.length === 0) return [];
  const keys = tableKeys(values);
  if (keys) {
    const raw = keys.map((k) => values.map((o) => (o as Obj)[k]!));
    const columns = raw.map((c, k) => derivedColumn(raw, k) ?? packArray(c));
    return { '~t': keys, '~n': values.length, '~c': columns };
  }
  return repeatColumn(values) ?? hashColumn(values) ?? countedColumn(values) ?? stepColumn(values) ?? dictionaryColumn(values) ?? values.map(packJson);
}

/** The stored form of a JSON value (see the module comment). */
export function packJson(x: Json): Json {
  if (Array.isArray(x)) return packArray(x);
  if (!isObj(x)) return x;
  const keys = Object.keys(x);
  if (keys.length >= 4 && !keys.some((k) => k.startsWith('~'))) {
    // A map of many entries (result index -> output hash): its keys and values as two columns.
    const values = keys.map((k) => x[k]!);
    const packed = values.every(isPrimitive) ? packArray(values) : null;
    if (isObj(packed)) return { '~m': packArray(keys), '~v': packed };
  }
  const out: Obj = {};
  let escape = false;
  for (const k in x) {
    if (k.startsWith('~')) escape = true;
    out[k] = packJson(x[k]!);
  }
  return escape ? { '~o': out } : out;
}

/** Row builders by key list: an object literal of fixed keys (one hidden class, no per-key
 * store) is several times faster to make than an object filled key by key, and a replay makes
 * hundreds of thousands of rows. Keys a literal cannot hold as plain data take the slow path. */
const rowMakers = new Map<string, ((columns: readonly Json[][], n: number) => Obj[]) | null>();
const LITERAL_UNSAFE = new Set(['__proto__']);

function rowMaker(keys: readonly string[]): ((columns: readonly Json[][], n: number) => Obj[]) | null {
  const sig = keys.join('\u0000');
  let make = rowMakers.get(sig);
  if (make === undefined) {
    // Unsafe keys, and repeated keys (stored keys come from Object.keys, so never), go key by key.
    make =
      keys.some((k) => LITERAL_UNSAFE.has(k)) || new Set(keys).size !== keys.length
        ? null
        : (new Function(
            'c',
            'n',
            `const rows = new Array(n); for (let i = 0; i < n; i++) rows[i] = {${keys.map((k, j) => `${JSON.stringify(k)}: c[${j}][i]`).join(', ')}}; return rows;`,
          ) as (columns: readonly Json[][], n: number) => Obj[]);
    if (rowMakers.size < 256) rowMakers.set(sig, make);
  }
  return make;
}

function unpackTable(m: Obj): Obj[] {
  const keys = m['~t'] as string[];
  const n = m['~n'] as number;
  const packed = m['~c'] as Json[];
  const columns: (Json[] | null)[] = new Array(packed.length);
  for (let k = 0; k < packed.length; k++) {
    const c = packed[k]!;
    columns[k] = isObj(c) && '~p' in c ? null : (unpackJson(c) as Json[]);
  }
  // Derived columns last: they read the column they were derived from.
  for (let k = 0; k < packed.length; k++) {
    if (columns[k] !== null) continue;
    const [prefix, j, length] = (packed[k] as Obj)['~p'] as [string, number, number];
    const source = columns[j];
    if (!source) throw new Error(`derived column ${k} names column ${j}, which is not a stored column`);
    const out: Json[] = new Array(source.length);
    for (let i = 0; i < source.length; i++) out[i] = prefix + (source[i] as string).slice(0, length);
    columns[k] = out;
  }
  const make = rowMaker(keys);
  if (make) return make(columns as Json[][], n);
  const rows: Obj[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const row: Obj = {};
    for (let k = 0; k < keys.length; k++) row[keys[k]!] = columns[k]![i]!;
    rows[i] = row;
  }
  return rows;
}

/** Hashes from their base64 bytes: one hex text for the column, each hash a slice of it (one
 * native call per column instead of one per hash). A slice keeps its column's text alive (64
 * characters per hash of the column), which the readers of these events, keeping most of a
 * column's hashes or none, do not notice. */
function unpackHashes(m: Obj): Json[] {
  const bytes = Buffer.from(m['~h'] as string, 'base64');
  const nulls = (m['~z'] as number[] | undefined) ?? [];
  const out: Json[] = new Array(bytes.length / 32 + nulls.length);
  let z = 0;
  let at = 0;
  for (let i = 0; i < out.length; i++) {
    if (nulls[z] === i) {
      out[i] = null;
      z++;
    } else {
      // A string of its own per hash: a slice of the whole list's hex would keep the list alive
      // for as long as any one hash is kept (a cache key, the Judge's state), tens of MB a run.
      out[i] = bytes.toString('hex', at, at + 32);
      at += 32;
    }
  }
  return out;
}

/** DIGITS' index of each character code. */
const DIGIT_AT = (() => {
  const at = new Int8Array(128).fill(-1);
  for (let i = 0; i < DIGITS.length; i++) at[DIGITS.charCodeAt(i)] = i;
  return at;
})();

function unpackMarker(m: Obj): Json[] | Obj {
  // Markers put their key first: one look at it picks the kind.
  let first = '';
  for (const k in m) {
    first = k;
    break;
  }
  switch (first) {
    case '~o':
      return unpackObject(m['~o'] as Obj);
    case '~m': {
      const keys = unpackJson(m['~m']!) as string[];
      const values = unpackJson(m['~v']!) as Json[];
      const out: Obj = {};
      for (let i = 0; i < keys.length; i++) out[keys[i]!] = values[i]!;
      return out;
    }
    case '~t':
      return unpackTable(m);
    case '~h':
      return unpackHashes(m);
    case '~s': {
      const runs = m['~s'] as Json[];
      let n = 0;
      for (let r = 0; r < runs.length; r += 3) n += runs[r + 1] === null ? 1 : (runs[r + 2] as number);
      const out: Json[] = new Array(n);
      let at = 0;
      for (let r = 0; r < runs.length; r += 3) {
        const prefix = runs[r] as string;
        const first = runs[r + 1] as number | null;
        const count = runs[r + 2] as number;
        if (first === null) out[at++] = prefix;
        else for (let i = 0; i < count; i++) out[at++] = prefix + String(first + i);
      }
      return out;
    }
    case '~r': {
      const runs = m['~r'] as Json[];
      const out: Json[] = [];
      for (let r = 0; r < runs.length; r += 2) for (let i = runs[r + 1] as number; i > 0; i--) out.push(runs[r]!);
      return out;
    }
    case '~a':
      return fromRuns(m['~a'] as number[]);
    case '~a2': {
      const [even, odd] = (m['~a2'] as number[][]).map(fromRuns) as [number[], number[]];
      const out: number[] = new Array(even.length + odd.length);
      for (let i = 0; i < even.length; i++) out[2 * i] = even[i]!;
      for (let i = 0; i < odd.length; i++) out[2 * i + 1] = odd[i]!;
      return out;
    }
    case '~k':
      return new Array<Json>(m['~n'] as number).fill(m['~k']!);
    case '~d': {
      const distinct = m['~d'] as Json[];
      const digits = m['~i'] as string;
      const out: Json[] = new Array(digits.length);
      for (let i = 0; i < digits.length; i++) {
        const c = digits.charCodeAt(i);
        out[i] = distinct[c < 128 ? DIGIT_AT[c]! : -1]!;
      }
      return out;
    }
  }
  throw new Error(`unknown marker ${first} in packed data`);
}

function fromRuns(runs: readonly number[]): number[] {
  let n = 0;
  for (let r = 2; r < runs.length; r += 3) n += runs[r]!;
  const out: number[] = new Array(n);
  let at = 0;
  for (let r = 0; r < runs.length; r += 3) {
    const first = runs[r]!;
    const step = runs[r + 1]!;
    const count = runs[r + 2]!;
    for (let i = 0; i < count; i++) out[at++] = first + step * i;
  }
  return out;
}

function unpackObject(o: Obj): Obj {
  const out: Obj = {};
  for (const k in o) out[k] = unpackJson(o[k]!);
  return out;
}

/** The value a stored form stands for. Throws on a marker it does not know. */
export function unpackJson(x: Json): Json {
  if (Array.isArray(x)) return x.map((v) => unpackJson(v));
  if (!isObj(x)) return x;
  for (const k in x) {
    // Markers put their key first; data objects never start with `~` (they are escaped).
    if (k.startsWith('~')) return unpackMarker(x);
    break;
  }
  return unpackObject(x);
}
