import { describe, expect, it } from 'vitest';
import {
  initialTcsStage,
  nextTcsStage,
  pushBuffer,
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
});
