import { describe, expect, it } from 'vitest';
import { bestOfN, cureAdvantages, cureBalanceStd, cureLengthRegularize, cureRewards } from '../../src/rewards/cure.js';
import { parseMatrix, verdictsFromCodes } from '../../src/rewards/matrix.js';

const tests = [
  { id: 'gt1', suite: 'gt' },
  { id: 'gt2', suite: 'gt' },
  { id: 'u1', suite: 'gen' },
  { id: 'u2', suite: 'gen' },
  { id: 'u3', suite: 'gen' },
];
const programs = [{ id: 'ref', isReference: true }, { id: 'p1' }, { id: 'p2' }, { id: 'p3' }, { id: 'p4' }];

describe('CURE rewards', () => {
  //        gt1 gt2 u1 u2 u3
  // ref     A   A   A  A  A
  // p1      A   A   A  A  W   correct
  // p2      A   A   A  W  A   correct
  // p3      A   W   W  A  W   incorrect
  // p4      W   W   A  A  W   incorrect
  const m = parseMatrix({ programs, tests, verdicts: verdictsFromCodes(['AAAAA', 'AAAAW', 'AAAWA', 'AWWAW', 'WWAAW']) });

  it('code reward = share of GT tests passed; I_j = passes all GT', () => {
    const r = cureRewards(m);
    expect(r.programs.map((p) => [p.program, p.correct, p.reward])).toEqual([
      ['p1', true, 1],
      ['p2', true, 1],
      ['p3', false, 0.5],
      ['p4', false, 0],
    ]);
    expect([r.correctCount, r.incorrectCount, r.defined]).toEqual([2, 2, true]);
  });

  it('test reward: +share of incorrect failing if all correct pass, else -share of incorrect passing', () => {
    const r = cureRewards(m);
    // u1: p1, p2 pass -> + (p3 fails, p4 passes) = +1/2
    // u2: p2 fails -> - (p3, p4 both pass) = -2/2
    // u3: p1 fails -> - (p3, p4 both fail: 0 pass) = 0 (and not -0)
    expect(r.tests.map((t) => [t.test, t.reward])).toEqual([
      ['u1', 0.5],
      ['u2', -1],
      ['u3', 0],
    ]);
    expect(Object.is(r.tests[2]!.reward, 0)).toBe(true);
  });

  it('no correct program: test rewards are undefined, all 0', () => {
    const none = parseMatrix({ programs: programs.slice(1), tests, verdicts: verdictsFromCodes(['AWAAA', 'WAAWA', 'WWAAA', 'WWWWW']) });
    const r = cureRewards(none);
    expect(r.defined).toBe(false);
    expect(r.tests.map((t) => t.reward)).toEqual([0, 0, 0]);
    // code rewards still: 1/2, 1/2, 0, 0
    expect(r.programs.map((p) => p.reward)).toEqual([0.5, 0.5, 0, 0]);
  });

  it('no incorrect program: the sign alone, +1 if the test passes every correct program, else -1', () => {
    const all = parseMatrix({ programs: programs.slice(1, 3), tests, verdicts: verdictsFromCodes(['AAAWA', 'AAAAA']) });
    const r = cureRewards(all);
    expect(r.incorrectCount).toBe(0);
    expect(r.tests.map((t) => t.reward)).toEqual([1, -1, 1]);
  });

  it('sandbox errors: unknown correctness is left out of test rewards', () => {
    // p2's gt1 is a sandbox error: correctness unknown, code reward 1/1.
    // p4's u1 is a sandbox error: u1 judged on p3 alone.
    const s = parseMatrix({ programs, tests, verdicts: verdictsFromCodes(['AAAAA', 'AAAAW', 'SAAWA', 'AWWAW', 'WWSAW']) });
    const r = cureRewards(s);
    expect(r.programs[1]).toMatchObject({ program: 'p2', correct: null, reward: 1, gtObserved: 1 });
    // u1: correct = {p1} passes; incorrect observed = {p3} fails -> +1
    // u2: p1 passes; incorrect p3, p4 pass -> +0 (all correct pass: + share failing = 0/2)
    // u3: p1 fails -> - (p3, p4 pass: none) = 0
    expect(r.tests.map((t) => t.reward)).toEqual([1, 0, 0]);
    expect(r.tests[0]).toMatchObject({ incorrectObserved: 1, incorrectFailing: 1 });
  });

  it('best-of-N picks the program passing most generated tests, earliest on ties', () => {
    // generated passes: p1 2 (u1, u2), p2 2 (u1, u3), p3 1, p4 2
    const b = bestOfN(m);
    expect(b.program).toBe('p1');
    expect(b.passed).toBe(2);
    expect(b.scores.map((s) => s.passed)).toEqual([2, 2, 1, 2]);
    // on u3 alone, only p2 passes
    expect(bestOfN(m, [4]).program).toBe('p2');
  });
});

// The release's rules (Gen-Verse/CURE optimization/reward.py at 69fe174), values worked by hand.
describe('CURE switches and normalization, as the release computes them', () => {
  //        gt  u1 u2 u3 u4
  // c1      A   A  W  A  A   correct
  // c2      A   A  A  A  A   correct
  // w1      W   W  A  A  W   incorrect
  // w2      W   A  W  A  W   incorrect
  // w3      W   W  W  A  W   incorrect
  const m = parseMatrix({
    programs: ['c1', 'c2', 'w1', 'w2', 'w3'].map((id) => ({ id })),
    tests: [{ id: 'gt', suite: 'gt' }, ...['u1', 'u2', 'u3', 'u4'].map((id) => ({ id, suite: 'gen' }))],
    verdicts: verdictsFromCodes(['AAWAA', 'AAAAA', 'WWAAW', 'WAWAW', 'WWWAW']),
  });

  it('post_stage off: the share of incorrect programs failing (or passing) the test', () => {
    const r = cureRewards(m);
    expect(r.rewardId).toBe('cure/v1');
    // u1: correct pass, 2 of 3 incorrect fail: 2/3. u2: c1 fails, 1 of 3 incorrect passes: -1/3.
    // u3: correct pass, no incorrect fails: 0. u4: correct pass, all incorrect fail: 1.
    expect(r.tests.map((t) => t.reward)).toEqual([2 / 3, -1 / 3, 0, 1]);
  });

  it('post_stage on: all-or-nothing (1 only if every incorrect program fails; -1 if any passes)', () => {
    const r = cureRewards(m, { postStage: true });
    expect(r.rewardId).toBe('cure-post-stage/v1');
    expect(r.tests.map((t) => t.reward)).toEqual([0, -1, 0, 1]);
    expect(Object.is(r.tests[0]!.reward, 0)).toBe(true);
  });

  it('zero spread is decided on the values: ten rewards of 0.8 drop the group', () => {
    const r = Array.from({ length: 10 }, () => 0.8);
    // Left to right the mean is 0.7999999999999999 and the std 1.1e-16: every z-score would be +1.
    expect(r.reduce((s, x) => s + x, 0) / 10).toBe(0.7999999999999999);
    expect(cureAdvantages(r)).toBeNull();
    expect(cureAdvantages([0.1, 0.1, 0.1])).toBeNull();
  });

  it('z-scores sum as numpy does (pairwise past eight values)', () => {
    // Nine 0.1s and a 0.2: numpy's mean is 0.11000000000000001 (left to right 0.10999999999999999)
    // and its std 0.030000000000000002; numpy prints the z-scores -0.3333333333333336 and
    // 2.9999999999999996.
    const a = cureAdvantages([...Array.from({ length: 9 }, () => 0.1), 0.2])!;
    expect(a[0]).toBe(-0.3333333333333336);
    expect(a[9]).toBe(2.9999999999999996);
  });

  it('enable_efficient keeps an all-ones group and length-regularizes it', () => {
    // Without the switch: dropped. With it: signs all +1, median length 1500 (within
    // [1000, 8000]), rewards 1500 - length = [1000, 0, -1000], balanced (1000 = |-1000|,
    // scale 1) and divided by their population std sqrt(2e6 / 3).
    expect(cureAdvantages([1, 1, 1])).toBeNull();
    const std = Math.sqrt(2e6 / 3);
    expect(cureAdvantages([1, 1, 1], { enableEfficient: true }, [500, 1500, 2500])).toEqual([1000 / std, 0 / std, -1000 / std]);
    // Every length under 1000: the threshold is clamped to 1000, every reward positive: dropped.
    expect(cureAdvantages([1, 1, 1], { enableEfficient: true }, [100, 200, 300])).toBeNull();
    // Length regularization alone, and enable_efficient without it (lengthRegularize: false).
    expect(cureAdvantages([1, 1, 1], { enableEfficient: true, lengthRegularize: false })).toEqual([1, 1, 1]);
    expect(() => cureAdvantages([0, 1], { lengthRegularize: true })).toThrow(/response length/);
  });

  it('length_regularize: positives earn threshold - length, negatives the least value, then balanced', () => {
    // z-scores of [1, 1, 0, 0] are [1, 1, -1, -1]. Positive lengths 1200 and 3000: median 2100.
    // reg = [900, -900, then min(900, -900, 0, 0) = -900 twice]; positives sum 900, negatives
    // 2700: scale 3, so [2700, -900, -900, -900], mean 0, population std sqrt(9720000 / 4).
    const std = Math.sqrt(9720000 / 4);
    expect(cureAdvantages([1, 1, 0, 0], { enableEfficient: true }, [1200, 3000, 500, 9000])).toEqual([2700 / std, -900 / std, -900 / std, -900 / std]);
    // A median above max_len_threshold is clamped: lengths 9000 and 11000 -> threshold 8000.
    // reg = [-1000, -3000, -3000, -3000]: no positive value left, dropped.
    expect(cureLengthRegularize([1, 1, -1, -1], [9000, 11000, 10, 10])).toBeNull();
    // Equal positive lengths: the balanced signs alone.
    expect(cureLengthRegularize([1, -1], [10, 10])).toEqual([1, -1]);
    // [4, -1, -1]: positives scaled by 2 / 4 to [2, -1, -1], population std sqrt(6 / 3).
    expect(cureBalanceStd([4, -1, -1])).toEqual([2 / Math.sqrt(2), -1 / Math.sqrt(2), -1 / Math.sqrt(2)]);
    expect(cureBalanceStd([0, -1])).toBeNull();
  });
});
