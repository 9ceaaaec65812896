/**
 * A small seeded PRNG, identical on every platform: xoshiro128** over uint32 arithmetic
 * (Math.imul and >>> only, no floating-point in the state update).
 *
 * Seeds are non-negative safe integers (< 2^53). `deriveSeed(seed, ...labels)` hashes a parent
 * seed and labels into a child seed, so every effect (sampling for problem p, round r, ...)
 * gets its own reproducible stream that does not depend on how many numbers others drew.
 */

const TWO_32 = 4294967296;
const MAX_SEED = Number.MAX_SAFE_INTEGER;

export class RngError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RngError';
  }
}

function checkSeed(seed: number, where: string): void {
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > MAX_SEED) {
    throw new RngError(`${where}: seed must be an integer in [0, 2^53), got ${String(seed)}`);
  }
}

/** murmur3's 32-bit finalizer: full avalanche of a uint32. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** splitmix32 step: expands one uint32 into a well-mixed sequence (used for seeding only). */
function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) >>> 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
  z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
  return (z ^ (z >>> 15)) >>> 0;
}

function splitSeed(seed: number): [number, number] {
  const lo = seed % TWO_32;
  const hi = Math.floor(seed / TWO_32);
  return [lo >>> 0, hi >>> 0];
}

/**
 * Child seed from a parent seed and labels. Each label is mixed with its length first, so
 * ("ab","c") and ("a","bc") differ. Labels are hashed by UTF-16 code unit, which is the same on
 * every platform. Returns a 53-bit integer.
 */
export function deriveSeed(seed: number, ...labels: string[]): number {
  checkSeed(seed, 'deriveSeed');
  const [lo, hi] = splitSeed(seed);
  // Two independent 32-bit lanes, each a multiply-xorshift hash of the same input stream.
  let h1 = fmix32(lo ^ 0x6a09e667) ^ hi;
  let h2 = fmix32(hi ^ 0xbb67ae85) ^ lo;
  const feed = (x: number): void => {
    h1 = Math.imul(h1 ^ x, 0x9e3779b1);
    h1 = (h1 << 13) | (h1 >>> 19);
    h2 = Math.imul(h2 ^ x, 0x85ebca77);
    h2 = (h2 << 17) | (h2 >>> 15);
  };
  for (const label of labels) {
    feed(label.length ^ 0x5bd1e995);
    for (let i = 0; i < label.length; i++) feed(label.charCodeAt(i));
  }
  h1 = fmix32(h1 ^ Math.imul(h2, 0x27d4eb2f));
  h2 = fmix32(h2 ^ Math.imul(h1, 0x165667b1));
  // 21 bits of h2 above 32 bits of h1: a safe integer.
  return (h2 & 0x1fffff) * TWO_32 + h1;
}

export interface RngState {
  readonly s: readonly [number, number, number, number];
}

export class Rng {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;

  constructor(seed: number) {
    checkSeed(seed, 'Rng');
    const [lo, hi] = splitSeed(seed);
    const st = { s: fmix32(lo) ^ Math.imul(hi, 0x9e3779b1) };
    this.#s0 = splitmix32(st);
    this.#s1 = splitmix32(st);
    this.#s2 = splitmix32(st);
    this.#s3 = splitmix32(st);
    // xoshiro must not start from the all-zero state.
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1;
  }

  /** Resume a stream from a saved state (e.g. recorded in an event). */
  static fromState(state: RngState): Rng {
    const r = new Rng(0);
    const [a, b, c, d] = state.s;
    for (const x of state.s) {
      if (!Number.isInteger(x) || x < 0 || x >= TWO_32) throw new RngError(`Rng.fromState: state words must be uint32, got ${String(x)}`);
    }
    if ((a | b | c | d) === 0) throw new RngError('Rng.fromState: the all-zero state is invalid');
    r.#s0 = a;
    r.#s1 = b;
    r.#s2 = c;
    r.#s3 = d;
    return r;
  }

  state(): RngState {
    return { s: [this.#s0, this.#s1, this.#s2, this.#s3] };
  }

  /** Next uint32. */
  nextUint32(): number {
    const result = Math.imul((Math.imul(this.#s1, 5) << 7) | (Math.imul(this.#s1, 5) >>> 25), 9) >>> 0;
    const t = (this.#s1 << 9) >>> 0;
    this.#s2 = (this.#s2 ^ this.#s0) >>> 0;
    this.#s3 = (this.#s3 ^ this.#s1) >>> 0;
    this.#s1 = (this.#s1 ^ this.#s2) >>> 0;
    this.#s0 = (this.#s0 ^ this.#s3) >>> 0;
    this.#s2 = (this.#s2 ^ t) >>> 0;
    this.#s3 = ((this.#s3 << 11) | (this.#s3 >>> 21)) >>> 0;
    return result;
  }

  /** Uniform float in [0, 1) with 53 random bits. */
  next(): number {
    const a = this.nextUint32() >>> 5; // 27 bits
    const b = this.nextUint32() >>> 6; // 26 bits
    return (a * 67108864 + b) / 9007199254740992;
  }

  /** Uniform integer in [0, n), unbiased (rejection sampling); 1 <= n <= 2^32. */
  int(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > TWO_32) {
      throw new RngError(`Rng.int: n must be an integer in [1, 2^32], got ${String(n)}`);
    }
    // Largest multiple of n not above 2^32; draws at or above it are rejected.
    const limit = TWO_32 - (TWO_32 % n);
    for (;;) {
      const x = this.nextUint32();
      if (x < limit) return x % n;
    }
  }

  /** Uniform integer in [lo, hi], both inclusive. Spans past 2^32 draw from 53 random bits
   * (bias below 2^-20 for spans up to 2^33, irrelevant for input generation). */
  between(lo: number, hi: number): number {
    const n = hi - lo + 1;
    return n <= TWO_32 ? lo + this.int(n) : lo + Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RngError('Rng.pick: cannot pick from an empty list');
    return items[this.int(items.length)] as T;
  }

  /** A shuffled copy (Fisher-Yates); the input is not modified. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const tmp = out[i] as T;
      out[i] = out[j] as T;
      out[j] = tmp;
    }
    return out;
  }

  /** An independent child stream, reproducible from this stream's seed and the label. */
  static derive(seed: number, ...labels: (string | number)[]): Rng {
    return new Rng(deriveSeed(seed, ...labels.map(String)));
  }
}

export function createRng(seed: number): Rng {
  return new Rng(seed);
}
