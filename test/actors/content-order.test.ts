/**
 * The orderings that make decisions independent of arrival order: ids compared by content
 * (indices as numbers), lists kept sorted by id whatever order their items came in, and load
 * outcomes merged the same way in any order.
 */
import { describe, expect, it } from 'vitest';
import { compareIds, insertById, sortById } from '../../src/actors/content-order.js';
import { mergeLoad, type ModuleLoad } from '../../src/core/module-load.js';
import { Rng } from '../../src/core/rng.js';

describe('compareIds', () => {
  it('orders indices as numbers and everything else by code unit', () => {
    const ids = ['1/p/s10', '1/p/s2', '1/p/s0', '1/p/s1/t1', '1/p/s1/t0', '1/p/s1', '10/p/s0', '2/p/s0', '1/q/s0', '1/P/s0'];
    expect(sortById(ids, (x) => x)).toEqual(['1/P/s0', '1/p/s0', '1/p/s1', '1/p/s1/t0', '1/p/s1/t1', '1/p/s2', '1/p/s10', '1/q/s0', '2/p/s0', '10/p/s0']);
    expect(compareIds('s007', 's7')).not.toBe(0);
    expect(Math.sign(compareIds('s007', 's7'))).toBe(-Math.sign(compareIds('s7', 's007')));
    expect(compareIds('s99999999999999999999', 's100000000000000000000')).toBeLessThan(0);
    expect(compareIds('a', 'a')).toBe(0);
  });
});

describe('insertById', () => {
  it('builds the same list from any arrival order', () => {
    const ids = Array.from({ length: 12 }, (_, i) => ({ id: `3/demo/x/s${i % 6}/t${Math.floor(i / 6)}` }));
    const built = (order: typeof ids) => order.reduce<typeof ids>((list, item) => insertById(list, item, (x) => x.id), []);
    const reference = built(ids);
    for (let seed = 1; seed <= 5; seed++) expect(built(new Rng(seed).shuffle(ids))).toEqual(reference);
    expect(reference.map((x) => x.id).slice(0, 3)).toEqual(['3/demo/x/s0/t0', '3/demo/x/s0/t1', '3/demo/x/s1/t0']);
  });
});

describe('mergeLoad', () => {
  it('gives the same outcome in any order, and unknown never replaces a told outcome', () => {
    const all: ModuleLoad[] = ['unknown', 'ran', 'raised', 'compile_error'];
    for (const a of all) for (const b of all) expect(mergeLoad(mergeLoad(undefined, a), b)).toBe(mergeLoad(mergeLoad(undefined, b), a));
    expect(mergeLoad('ran', 'unknown')).toBe('ran');
    expect(mergeLoad('ran', 'raised')).toBe('raised');
  });
});
