import { describe, expect, it } from 'vitest';
import { backoffMs } from '../../src/core/backoff.js';
import { Limiter, mapLimit } from '../../src/core/limiter.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('Limiter and mapLimit', () => {
  it('runs at most `limit` tasks at once, started in the order they asked', async () => {
    const limiter = new Limiter(2);
    let active = 0;
    let most = 0;
    const started: number[] = [];
    const release: Array<() => void> = [];
    const runs = [0, 1, 2, 3, 4].map((i) =>
      limiter.run(async () => {
        started.push(i);
        most = Math.max(most, ++active);
        await new Promise<void>((r) => release.push(r));
        active--;
        return i * 10;
      }),
    );
    // Finish the running tasks one at a time; each frees a slot for the next in line.
    for (let k = 0; k < 10; k++) {
      await tick();
      release.shift()?.();
    }
    expect(await Promise.all(runs)).toEqual([0, 10, 20, 30, 40]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect(() => new Limiter(0)).toThrow(/positive integer/);
  });

  it('maps in input order with a bounded number in flight, and a failure frees its slot', async () => {
    let active = 0;
    let most = 0;
    const out = await mapLimit([5, 1, 4, 2, 3], 2, async (x, i) => {
      most = Math.max(most, ++active);
      await new Promise((r) => setTimeout(r, x));
      active--;
      return `${i}:${x}`;
    });
    expect(out).toEqual(['0:5', '1:1', '2:4', '3:2', '4:3']);
    expect(most).toBe(2);
    const limiter = new Limiter(1);
    await expect(limiter.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await limiter.run(async () => 'next')).toBe('next');
  });
});

describe('backoffMs', () => {
  it('doubles from the base after each failure, capped', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffMs(250, 2000, n))).toEqual([250, 500, 1000, 2000, 2000, 2000]);
    expect(backoffMs(100, 2000, 0)).toBe(100);
  });
});
