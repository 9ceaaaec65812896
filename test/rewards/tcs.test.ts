import { describe, expect, it } from 'vitest';
import {
  initialTcsStage,
  nextTcsStage,
  pushBuffer,
  rollTcsBuffer,
  suitesAtFailureModes,
  restrictToFailureModes,
  tcsStage1Reward,
  tcsStage2Reward,
  type TcsBufferEntry,
} from '../../src/rewards/tcs.js';

const e = (k: string, v: number, valid: boolean | null = true): TcsBufferEntry => ({ testKey: k, testHash: `h${k}`, policyVersion: v, round: v, valid });

describe('TCS', () => {
  it('rolling policy-aligned buffer: stale entries out, then the oldest beyond size', () => {
    const b = pushBuffer([e('a', 1), e('b', 2), e('c', 3)], [e('d', 4), e('e', 4)], 4, { bufferSize: 3, maxStaleness: 1 });
    // versions >= 3 survive staleness: c, d, e; size 3 -> all three
    expect(b.map((x) => x.testKey)).toEqual(['c', 'd', 'e']);
    const big = pushBuffer([e('a', 1), e('b', 2)], [e('c', 2)], 2, { bufferSize: 2, maxStaleness: null });
    expect(big.map((x) => x.testKey)).toEqual(['b', 'c']);
  });

  it('stage 1 reward is validity against the reference', () => {
    expect(tcsStage1Reward('accepted')).toBe(1);
    expect(tcsStage1Reward('wrong_answer')).toBe(0);
    expect(tcsStage1Reward('sandbox_error')).toBeNull();
  });

  it('stage 2 rewards counterexamples among valid tests', () => {
    // valid, fails 1 of 3 solvers: 0.5*1 + 0.5*1 = 1 ('any'); 0.5 + 0.5*(1/3) ('fraction')
    expect(tcsStage2Reward('accepted', ['accepted', 'wrong_answer', 'accepted'])).toBe(1);
    expect(tcsStage2Reward('accepted', ['accepted', 'wrong_answer', 'accepted'], { counterexample: 'fraction' })).toBe(0.5 + 0.5 / 3);
    // valid but no solver fails: 0.5
    expect(tcsStage2Reward('accepted', ['accepted', 'sandbox_error'])).toBe(0.5);
    // invalid: a "counterexample" that the reference fails earns nothing
    expect(tcsStage2Reward('wrong_answer', ['wrong_answer'])).toBe(0);
    expect(tcsStage2Reward(null, ['wrong_answer'])).toBeNull();
  });

  it('stage 2 buffer is restricted to current failure modes', () => {
    const b = [e('a', 1), e('b', 1, false), e('c', 1)];
    expect(restrictToFailureModes(b, new Set(['b', 'c'])).map((x) => x.testKey)).toEqual(['c']);
  });

  it('switches stage after N rounds or at a validity threshold, and stays in stage 2', () => {
    const byRounds = { switchRule: { kind: 'rounds' as const, afterRounds: 2 } };
    let s = initialTcsStage();
    s = nextTcsStage(s, 0.1, byRounds);
    expect(s).toEqual({ stage: 1, roundsInStage: 1 });
    s = nextTcsStage(s, 0.1, byRounds);
    expect(s).toEqual({ stage: 2, roundsInStage: 0 });
    s = nextTcsStage(s, 0, byRounds);
    expect(s.stage).toBe(2);

    const byValidity = { switchRule: { kind: 'validity' as const, threshold: 0.8, minRounds: 2 } };
    let v = nextTcsStage(initialTcsStage(), 0.9, byValidity); // too early
    expect(v.stage).toBe(1);
    v = nextTcsStage(v, 0.79, byValidity);
    expect(v.stage).toBe(1);
    v = nextTcsStage(v, 0.8, byValidity);
    expect(v.stage).toBe(2);
    expect(() => nextTcsStage(v, 1.5)).toThrow(/validityRate/);
  });

  it('suite buffer: policy-aligned, oldest dropped beyond size, the round kept whole', () => {
    const suite = (id: string, round: number, v: number, n: number) => ({
      suiteId: id,
      round,
      policyVersion: v,
      tests: Array.from({ length: n }, (_, i) => ({ testId: `${id}/${i}`, testHash: `h${id}${i}`, consistent: 1 as const })),
    });
    const old = [suite('a', 1, 0, 2), suite('b', 2, 1, 2), suite('c', 3, 2, 2)];
    // Version 3 now, maxStaleness 1: versions >= 2 stay, so a (v0) and b (v1) go, c (v2) stays.
    expect(rollTcsBuffer(old, [suite('d', 4, 3, 2)], 3, { maxStaleness: 1 }).map((s) => s.suiteId)).toEqual(['c', 'd']);
    // Any version, 5 tests at most: the oldest go first; the round's own suites are never dropped.
    expect(rollTcsBuffer(old, [suite('d', 4, 3, 2)], 3, { maxStaleness: null, bufferSize: 5 }).map((s) => s.suiteId)).toEqual(['c', 'd']);
    expect(rollTcsBuffer(old, [suite('d', 4, 3, 6)], 3, { maxStaleness: null, bufferSize: 5 }).map((s) => s.suiteId)).toEqual(['d']);
    // A suite already buffered is replaced by the round's version of it, not kept twice.
    expect(rollTcsBuffer(old, [suite('c', 3, 2, 2)], 2, { maxStaleness: null }).map((s) => s.suiteId)).toEqual(['a', 'b', 'c']);
    // Stage 2: only suites holding a consistent test that a current program fails.
    const withBad = [...old, { suiteId: 'e', round: 3, policyVersion: 2, tests: [{ testId: 'e/0', testHash: 'he0', consistent: 0 as const }] }];
    expect(suitesAtFailureModes(withBad, new Set(['b/1', 'e/0'])).map((s) => s.suiteId)).toEqual(['b']);
  });
});
