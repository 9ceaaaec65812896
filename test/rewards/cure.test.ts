import { describe, expect, it } from 'vitest';
import { bestOfN, cureRewards } from '../../src/rewards/cure.js';
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
