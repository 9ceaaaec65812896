import { describe, expect, it } from 'vitest';
import {
  applyMistakeBookChanges,
  emptyMistakeBook,
  isBlacklisted,
  topTests,
  updateMistakeBook,
  type MistakeBookState,
  type MistakeObservation,
  type MistakeRound,
} from '../../src/rewards/mistake-book.js';
import { Rng } from '../../src/core/rng.js';

const h = (k: string): string => `hash-${k}`;
function ob(testKey: string, verdict: MistakeObservation['verdict'], extra: Partial<MistakeObservation> = {}): MistakeObservation {
  return { testKey, testHash: h(testKey), programValid: true, testValid: true, verdict, ...extra };
}
function book(entries: Record<string, number>): MistakeBookState {
  return {
    entries: Object.keys(entries)
      .sort()
      .map((k) => ({ testKey: k, testHash: h(k), count: entries[k]!, blacklisted: false })),
  };
}
function counts(state: MistakeBookState): Record<string, number> {
  return Object.fromEntries(state.entries.filter((e) => !e.blacklisted).map((e) => [e.testKey, e.count]));
}
/** The update and its changes agree: replaying the changes rebuilds the state. */
function update(b: MistakeBookState, r: MistakeRound, o = {}) {
  const u = updateMistakeBook(b, r, o);
  expect(applyMistakeBookChanges(b, u.changes)).toEqual(u.state);
  return u;
}

describe('Mistake Book (Code-A1 semantics)', () => {
  it('counts failures of valid programs on valid tests, never sandbox errors', () => {
    const u = update(emptyMistakeBook(), {
      round: 1,
      observations: [
        ob('k1', 'wrong_answer'),
        ob('k1', 'runtime_error'),
        ob('k1', 'wrong_answer', { programValid: false }), // invalid program: no count
        ob('k2', 'sandbox_error'), // the sandbox failed: no count
        ob('k3', 'time_limit'), // a real timeout is a failure
        ob('k4', 'wrong_answer', { testValid: false }), // invalid test: no count
        ob('k5', 'accepted'), // a pass of a test not stored: nothing
        ob('k6', null), // not run
      ],
    });
    expect(counts(u.state)).toEqual({ k1: 2, k3: 1 });
    expect(u.changes).toEqual([
      { testKey: 'k1', testHash: 'hash-k1', delta: 2, count: 2, cause: 'fail' },
      { testKey: 'k3', testHash: 'hash-k3', delta: 1, count: 1, cause: 'fail' },
    ]);
  });

  it("'any' sources: applies passes of stored tests first, removes at 0, then adds failures", () => {
    const u = update(
      book({ k1: 2, k3: 1, k7: 5 }),
      {
        round: 2,
        observations: [
          ob('k1', 'accepted'),
          ob('k1', 'accepted'),
          ob('k1', 'accepted'), // 2 - 3 -> removed at 0, the third pass is lost
          ob('k3', 'accepted'), // 1 - 1 -> removed ...
          ob('k3', 'wrong_answer'), // ... and re-added by a failure: 1
          ob('k7', 'accepted', { programValid: false }), // invalid program: no count
        ],
      },
      { sources: 'any' },
    );
    expect(counts(u.state)).toEqual({ k3: 1, k7: 5 });
    expect(u.changes).toEqual([
      { testKey: 'k1', testHash: 'hash-k1', delta: -2, count: 0, cause: 'pass' },
      { testKey: 'k3', testHash: 'hash-k3', delta: -1, count: 0, cause: 'pass' },
      { testKey: 'k3', testHash: 'hash-k3', delta: 1, count: 1, cause: 'fail' },
    ]);
  });

  it("'code-a1' sources: only new tests' failures add, only replayed tests' passes subtract", () => {
    const u = update(
      book({ a: 2 }),
      {
        round: 1,
        observations: [
          ob('a', 'accepted', { origin: 'generated' }), // not a replay: ignored
          ob('a', 'wrong_answer', { origin: 'replay' }), // a replay failure: ignored
          ob('b', 'wrong_answer', { origin: 'generated' }),
          ob('a', 'accepted', { origin: 'replay' }),
        ],
      },
      { sources: 'code-a1' },
    );
    // a: 2 - 1 = 1; b: +1
    expect(counts(u.state)).toEqual({ a: 1, b: 1 });
  });
});

describe('Mistake Book additions', () => {
  it('blacklists a test that makes the reference fail, and never counts or replays it again', () => {
    const start = book({ k1: 4, k2: 1 });
    const u1 = update(start, {
      round: 3,
      observations: [ob('k1', 'wrong_answer', { isReference: true }), ob('k1', 'wrong_answer'), ob('k2', 'wrong_answer')],
    });
    expect(u1.changes).toEqual([
      { testKey: 'k1', testHash: 'hash-k1', delta: -4, count: 0, cause: 'blacklist' },
      { testKey: 'k2', testHash: 'hash-k2', delta: 1, count: 2, cause: 'fail' },
    ]);
    expect(isBlacklisted(u1.state, 'k1')).toBe(true);
    expect(topTests(u1.state).map((t) => t.testKey)).toEqual(['k2']);
    // Later failures of k1 do nothing; an invalidation of an unseen test leaves a tombstone.
    const u2 = update(u1.state, {
      round: 4,
      observations: [ob('k1', 'wrong_answer'), ob('k9', 'wrong_answer')],
      invalidated: [{ testKey: 'k9', testHash: h('k9') }],
    });
    expect(u2.changes).toEqual([{ testKey: 'k9', testHash: 'hash-k9', delta: 0, count: 0, cause: 'blacklist' }]);
    expect(counts(u2.state)).toEqual({ k2: 2 });
    // A reference sandbox error is not a failure: no blacklist.
    const u3 = update(u2.state, { round: 5, observations: [ob('k2', 'sandbox_error', { isReference: true })] });
    expect(u3.changes).toEqual([]);
  });

  it('the reference blacklist can be switched off', () => {
    const u = update(book({ k1: 1 }), { round: 1, observations: [ob('k1', 'wrong_answer', { isReference: true })] }, { blacklistOnReferenceFail: false });
    expect(u.changes).toEqual([]);
  });

  it('caps the book: evicts lowest counts, ties in stored order (the last stored goes first)', () => {
    const u = update(book({ a: 3, d: 2 }), { round: 1, observations: [ob('c', 'wrong_answer'), ob('b', 'wrong_answer'), ob('e', 'wrong_answer')] }, { cap: 3 });
    // after fails: a3 d2, then c1 b1 e1 stored in the order they failed; keep a, d, c
    expect(counts(u.state)).toEqual({ a: 3, c: 1, d: 2 });
    expect(u.changes.filter((c) => c.cause === 'cap')).toEqual([
      { testKey: 'b', testHash: 'hash-b', delta: -1, count: 0, cause: 'cap' },
      { testKey: 'e', testHash: 'hash-e', delta: -1, count: 0, cause: 'cap' },
    ]);
  });

  it('decays every k rounds by a fixed amount', () => {
    const opts = { decay: { every: 2, amount: 1 } };
    const start = book({ a: 3, b: 1 });
    // round 1: no decay
    expect(update(start, { round: 1, observations: [] }, opts).changes).toEqual([]);
    // round 2: a 3 -> 2, b 1 -> 0 (removed)
    const u = update(start, { round: 2, observations: [] }, opts);
    expect(counts(u.state)).toEqual({ a: 2 });
    expect(u.changes).toEqual([
      { testKey: 'a', testHash: 'hash-a', delta: -1, count: 2, cause: 'decay' },
      { testKey: 'b', testHash: 'hash-b', delta: -1, count: 0, cause: 'decay' },
    ]);
    // round 0 never decays
    expect(update(start, { round: 0, observations: [] }, opts).changes).toEqual([]);
  });

  it('topTests: count descending, then testKey; both call forms', () => {
    const b = book({ z: 5, a: 1, m: 5, c: 2, q: 1 });
    expect(topTests(b, 3).map((t) => t.testKey)).toEqual(['m', 'z', 'c']);
    expect(topTests(b).length).toBe(5);
    expect(topTests({ p1: b }, 'p1', 2)).toEqual([
      { testKey: 'm', testHash: 'hash-m', count: 5 },
      { testKey: 'z', testHash: 'hash-z', count: 5 },
    ]);
    expect(topTests({ p1: b }, 'other')).toEqual([]);
  });

  it('counts do not depend on the order of observations (only where new tests are stored does)', () => {
    const observations: MistakeObservation[] = [];
    for (let i = 0; i < 40; i++) {
      const key = `t${i % 7}`;
      observations.push(ob(key, i % 3 === 0 ? 'accepted' : i % 5 === 0 ? 'sandbox_error' : 'wrong_answer'));
    }
    const start = book({ t1: 2, t4: 1, t6: 3 });
    const opts = { decay: { every: 1, amount: 1 } };
    const a = updateMistakeBook(start, { round: 1, observations }, opts);
    const b = updateMistakeBook(start, { round: 1, observations: new Rng(7).shuffle(observations) }, opts);
    expect(counts(b.state)).toEqual(counts(a.state));
    const byKey = (u: typeof a) => [...u.changes].sort((x, y) => (x.cause + x.testKey < y.cause + y.testKey ? -1 : 1));
    expect(byKey(b)).toEqual(byKey(a));
    // The same observations in the same order give the same book, entry order included.
    expect(JSON.stringify(updateMistakeBook(start, { round: 1, observations }, opts))).toBe(JSON.stringify(a));
  });

  it('rejects bad rounds and options clearly', () => {
    expect(() => updateMistakeBook(emptyMistakeBook(), { round: -1, observations: [] })).toThrow(/round/);
    expect(() => updateMistakeBook(emptyMistakeBook(), { round: 1, observations: [ob('', 'accepted')] })).toThrow(/observations\.0\.testKey/);
    expect(() => updateMistakeBook(emptyMistakeBook(), { round: 1, observations: [] }, { cap: 0 })).toThrow(/cap/);
  });
});
