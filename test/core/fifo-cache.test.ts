import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { FifoCache } from '../../src/core/fifo-cache.js';

v8.setFlagsFromString('--expose-gc');

describe('FifoCache', () => {
  it('keeps nothing of an evicted entry, its key included, before its queue compacts', async () => {
    const gc = vm.runInNewContext('gc') as () => void;
    const c = new FifoCache<object, number>();
    const evicted: WeakRef<object>[] = [];
    for (let i = 0; i < 100; i++) {
      const key = { i };
      if (i < 10) evicted.push(new WeakRef(key));
      c.set(key, i);
    }
    for (let i = 0; i < 10; i++) c.shift();
    // A WeakRef holds its target until the task that made it ends.
    await new Promise((r) => setImmediate(r));
    gc();
    expect(evicted.filter((w) => w.deref() !== undefined)).toHaveLength(0);
    expect(c.size).toBe(90);
  });

  it('evicts in insertion order; a key set again keeps its place and takes the value', () => {
    const c = new FifoCache<string, number>();
    c.set('a', 1).set('b', 2).set('c', 3).set('a', 10);
    expect(c.size).toBe(3);
    expect(c.get('a')).toBe(10);
    expect(c.shift()).toEqual(['a', 10]);
    expect(c.has('a')).toBe(false);
    expect(c.shift()).toEqual(['b', 2]);
    expect(c.shift()).toEqual(['c', 3]);
    expect(c.shift()).toBeUndefined();
    expect(c.size).toBe(0);
  });

  it('stays a bounded window of the newest keys across many evictions (the queue compacts)', () => {
    const c = new FifoCache<number, number>();
    const bound = 1000;
    for (let i = 0; i < 20_000; i++) {
      if (c.size >= bound) expect(c.shift()![0]).toBe(i - bound);
      c.set(i, i * 2);
    }
    expect(c.size).toBe(bound);
    for (let i = 19_000; i < 20_000; i++) expect(c.get(i)).toBe(i * 2);
    expect(c.has(18_999)).toBe(false);
    c.clear();
    expect(c.size).toBe(0);
    expect(c.shift()).toBeUndefined();
    c.set(5, 5);
    expect(c.shift()).toEqual([5, 5]);
  });
});
