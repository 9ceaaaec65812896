import { describe, expect, it } from 'vitest';
import { Rng, RngError, deriveSeed } from '../../src/core/rng.js';

describe('seeded PRNG', () => {
  it('is xoshiro128**: reference outputs from state [1, 2, 3, 4]', () => {
    // Worked by hand from the algorithm: rotl(s1 * 5, 7) * 9, then the state update.
    const r = Rng.fromState({ s: [1, 2, 3, 4] });
    expect([r.nextUint32(), r.nextUint32(), r.nextUint32()]).toEqual([11520, 0, 5927040]);
  });

  it('same seed, same stream; state round-trips', () => {
    const a = new Rng(42);
    const b = new Rng(42);
    const xs = Array.from({ length: 100 }, () => a.next());
    expect(Array.from({ length: 100 }, () => b.next())).toEqual(xs);
    const saved = a.state();
    const next = a.nextUint32();
    expect(Rng.fromState(saved).nextUint32()).toBe(next);
    expect(new Rng(43).next()).not.toBe(new Rng(42).next());
  });

  it('next() in [0, 1); int(n) in range and roughly uniform', () => {
    const r = new Rng(7);
    const buckets = new Array<number>(6).fill(0);
    let outside = 0;
    for (let i = 0; i < 60000; i++) {
      const x = r.next();
      if (!(x >= 0 && x < 1)) outside++;
      buckets[r.int(6)]! += 1;
    }
    expect(outside).toBe(0);
    // each bucket expects 10000; 5 sigma is ~456
    for (const b of buckets) expect(Math.abs(b - 10000)).toBeLessThan(500);
  });

  it('shuffle is a permutation and leaves its input alone; pick chooses a member', () => {
    const r = new Rng(1);
    const xs = [1, 2, 3, 4, 5, 6, 7, 8];
    const ys = r.shuffle(xs);
    expect(xs).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect([...ys].sort((a, b) => a - b)).toEqual(xs);
    expect(xs).toContain(r.pick(xs));
    expect(() => r.pick([])).toThrow(RngError);
  });

  it('deriveSeed: stable, label-sensitive, unambiguous, a safe integer', () => {
    const s = deriveSeed(123, 'solver', 'problem-1', '0');
    expect(deriveSeed(123, 'solver', 'problem-1', '0')).toBe(s);
    expect(Number.isSafeInteger(s) && s >= 0).toBe(true);
    const others = [
      deriveSeed(124, 'solver', 'problem-1', '0'),
      deriveSeed(123, 'solver', 'problem-1', '1'),
      deriveSeed(123, 'solver', 'problem-10'),
      deriveSeed(123, 'solverproblem-1', '0'),
      deriveSeed(123, 'solver', 'problem-', '10'),
      deriveSeed(123),
    ];
    expect(new Set([s, ...others]).size).toBe(others.length + 1);
    // 10k derived seeds, no collision
    const many = new Set(Array.from({ length: 10000 }, (_, i) => deriveSeed(9, 'x', String(i))));
    expect(many.size).toBe(10000);
    // Child streams are independent of each other's draws.
    const a = Rng.derive(5, 'a');
    const b1 = Rng.derive(5, 'b').next();
    a.next();
    expect(Rng.derive(5, 'b').next()).toBe(b1);
  });

  it('rejects bad seeds and ranges', () => {
    expect(() => new Rng(-1)).toThrow(/seed/);
    expect(() => new Rng(1.5)).toThrow(/seed/);
    expect(() => deriveSeed(2 ** 53)).toThrow(/seed/);
    expect(() => new Rng(1).int(0)).toThrow(/int/);
    expect(() => Rng.fromState({ s: [0, 0, 0, 0] })).toThrow(/all-zero/);
  });
});
