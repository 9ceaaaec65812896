import { describe, expect, it } from 'vitest';
import {
  codeA1KeepCodeGroup,
  codeA1Rewards,
  codeA1SuiteReward,
  codeA1TopVarSuites,
  nonprintableRatio,
  topVar,
  validateResponse,
  validateSuite,
} from '../../src/rewards/code-a1.js';
import { RewardInputError, parseMatrix, verdictsFromCodes } from '../../src/rewards/matrix.js';

const P = 'pass' as const;
const F = 'fail' as const;
const U = 'unknown' as const;

describe('nonprintableRatio', () => {
  it('counts code points outside Python string.printable', () => {
    // "ab\t\n" is printable; "é" and "\u0000" are not: 2 of 6 code points.
    expect(nonprintableRatio('ab\t\né\u0000')).toBe(2 / 6);
    // An astral character is one code point, as Python's len counts it: 1 of 2.
    expect(nonprintableRatio('a😀')).toBe(1 / 2);
    expect(nonprintableRatio('assert f(1) == 2')).toBe(0);
    expect(nonprintableRatio('')).toBe(0);
  });
});

describe('validateSuite (Code-A1 test validation)', () => {
  it('drops malformed (uncounted), GT-raising and duplicate tests, keeps corrected ones, sets sandbox errors aside', () => {
    const v = validateSuite([
      { id: 'a', text: 'assert add(1, 2) == 3', gt: { kind: 'returned', repr: '3', matchesStated: true } },
      // Same GT-corrected statement as a once whitespace is normalized: a duplicate.
      { id: 'b', text: 'assert add(1,2)==3', gt: { kind: 'returned', repr: '3', matchesStated: true } },
      { id: 'c', text: 'add(1, 2)' },
      { id: 'd', text: 'assert add(2, 2) == 5', gt: { kind: 'returned', repr: '4', matchesStated: false } },
      { id: 'e', text: 'assert add("a", 1) == 1', gt: { kind: 'raised', exceptionType: 'TypeError' } },
      { id: 'f', text: 'assert add(0, 0) == 0', gt: { kind: 'sandbox_error' } },
      { id: 'g', text: 'assert add(5, 5) != 10' },
    ]);
    expect(v.tests.map((t) => [t.id, t.status, t.reason])).toEqual([
      ['a', 'valid', 'ok'],
      ['b', 'invalid', 'duplicate'],
      ['c', 'invalid', 'malformed'],
      ['d', 'corrected', 'corrected'],
      ['e', 'invalid', 'gt_raised'],
      ['f', 'unknown', 'gt_sandbox_error'],
      ['g', 'invalid', 'malformed'],
    ]);
    // |valid| = a, d; invalid = b, d (counted though used), e; unknown = f. The malformed c and g
    // are dropped without counting in invalid_t or the total (read in a code block, the
    // release's extractor skips them).
    expect([v.total, v.validCount, v.invalidCount, v.unknownCount]).toEqual([5, 2, 3, 1]);
    // The oracle is GT's output: d's key carries 4, not the stated 5.
    expect(v.tests[3]!.key).toBe('assert add(2,2)==4');
    expect(v.tests[3]!.oracleRepr).toBe('4');
  });

  it('a duplicate of a corrected test is counted invalid once more', () => {
    const v = validateSuite([
      { id: 'x', text: 'assert f(1) == 9', gt: { kind: 'returned', repr: '1', matchesStated: false } },
      { id: 'y', text: 'assert f(1) == 1', gt: { kind: 'returned', repr: '1', matchesStated: true } },
    ]);
    // x: corrected (+1 invalid), y: same corrected statement `assert f(1)==1` -> duplicate (+1).
    expect([v.validCount, v.invalidCount]).toEqual([1, 2]);
  });

  it('read outside a code block, a malformed line counts in invalid_t and the total', () => {
    const items = [
      { id: 'a', text: 'assert f(1) == 1', gt: { kind: 'returned' as const, repr: '1', matchesStated: true } },
      { id: 'b', text: 'assert f(2)' },
    ];
    const v = validateSuite(items, { source: 'bare' });
    expect([v.total, v.validCount, v.invalidCount]).toEqual([2, 1, 1]);
    expect(validateSuite(items)).toMatchObject({ total: 1, validCount: 1, invalidCount: 0 });
  });

  it('duplicates are found on the call as Python writes it, when the outcome gives it', () => {
    // f("a") and f('a') are one call to the release (ast.unparse writes f('a') for both).
    const v = validateSuite([
      { id: 'x', text: 'assert f("a") == 1', gt: { kind: 'returned', repr: '1', matchesStated: true, call: "f('a')" } },
      { id: 'y', text: "assert f('a') == 1", gt: { kind: 'returned', repr: '1', matchesStated: true, call: "f('a')" } },
    ]);
    expect(v.tests.map((t) => t.reason)).toEqual(['ok', 'duplicate']);
  });

  it('rejects bad input with the path of the problem', () => {
    expect(() => validateSuite([{ id: '', text: 'assert f(1) == 1' }])).toThrow(/generated tests: 0\.id/);
  });
});

describe('codeA1SuiteReward', () => {
  it('hist and gen', () => {
    const r = codeA1SuiteReward({
      gen: [P, F, P, P, F],
      invalidCount: 2,
      hist: [P, F, F, P],
      programValid: true,
      nonprintableRatio: 0.01,
    });
    // valid_ratio = min(5/8, 1 - 2/8) = 0.625; gen_pass = 3/5; gen_fail = 2/8;
    // hist_pass = 2/4, hist_fail = 0.5; pass = (0.5 + 0.6)/2 = 0.55;
    // attack = (0.25 - 0.5 + 1)/2 = 0.375; R_test = -0.01 + 0.5*0.625 + 0.5*0.375 = 0.49
    expect(r.case).toBe('hist+gen');
    expect(r.validRatio).toBe(0.625);
    expect(r.genPass).toBeCloseTo(0.6, 15);
    expect(r.genFail).toBe(0.25);
    expect(r.histPass).toBe(0.5);
    expect(r.histFail).toBe(0.5);
    expect(r.pass).toBeCloseTo(0.55, 15);
    expect(r.attack).toBe(0.375);
    expect(r.rTest).toBeCloseTo(0.49, 15);
  });

  it('gen only, with alpha 0.25', () => {
    const r = codeA1SuiteReward({ gen: [F, F, P], invalidCount: 0, hist: [], programValid: true, nonprintableRatio: 0 }, { alpha: 0.25 });
    // valid_ratio = min(3/8, 1) = 0.375; gen_pass = 1/3; gen_fail = 2/8; pass = 1/3;
    // attack = 0.25; R_test = 0.25*0.375 + 0.75*0.25 = 0.09375 + 0.1875 = 0.28125
    expect(r.case).toBe('gen');
    expect(r.pass).toBe(1 / 3);
    expect(r.attack).toBe(0.25);
    expect(r.rTest).toBe(0.28125);
  });

  it('hist only (no valid test)', () => {
    const r = codeA1SuiteReward({ gen: [], invalidCount: 3, hist: [P, P, F], programValid: true, nonprintableRatio: 0 });
    // valid_ratio = min(0/8, 1 - 3/8) = 0; pass = hist_pass = 2/3; attack = 0; R_test = 0
    expect(r.case).toBe('hist');
    expect(r.pass).toBe(2 / 3);
    expect(r.attack).toBe(0);
    expect(r.rTest).toBe(0);
  });

  it('neither hist nor valid test: all tests invalid', () => {
    const r = codeA1SuiteReward({ gen: [], invalidCount: 8, hist: [], programValid: true, nonprintableRatio: 0.2 });
    // pass = 0, attack = 0, valid_ratio = clip(min(0, 0)) = 0, R_test = -0.2
    expect(r.case).toBe('none');
    expect([r.pass, r.attack, r.validRatio]).toEqual([0, 0, 0]);
    expect(r.rTest).toBe(-0.2);
  });

  it('invalid program: the test policy earns only the nonprintable penalty', () => {
    const r = codeA1SuiteReward({ gen: [F, F], invalidCount: 0, hist: [F], programValid: false, nonprintableRatio: 0.05 });
    // attack would be (2/8 - 1 + 1)/2 = 0.125, but [c valid] = 0: R_test = -0.05
    expect(r.attack).toBe(0.125);
    expect(r.rTest).toBe(-0.05);
    expect(r.pass).toBe(0);
  });

  it('clips valid_ratio at 0 and 1', () => {
    // 1 - 10/8 < 0
    expect(codeA1SuiteReward({ gen: [P], invalidCount: 10, hist: [], programValid: true, nonprintableRatio: 0 }).validRatio).toBe(0);
    // min(12/8, 1 - 0) = 1
    const twelve = Array<typeof P>(12).fill(P);
    expect(codeA1SuiteReward({ gen: twelve, invalidCount: 0, hist: [], programValid: true, nonprintableRatio: 0 }).validRatio).toBe(1);
  });

  it('gen_fail looks at the first 8 valid tests only; gen_pass at all', () => {
    const gen = [P, P, F, F, F, F, F, F, F, F]; // 10 valid tests
    const r = codeA1SuiteReward({ gen, invalidCount: 0, hist: [], programValid: true, nonprintableRatio: 0 });
    // window = first 8: 6 fails -> 6/8; gen_pass = 2/10
    expect(r.genFail).toBe(0.75);
    expect(r.genPass).toBe(0.2);
  });

  it('sandbox errors are left out: not passes, not failures, not in the window', () => {
    const gen = [U, F, P, F, F, F, F, F, F, U];
    const r = codeA1SuiteReward({ gen, invalidCount: 0, hist: [U, U], programValid: true, nonprintableRatio: 0 });
    // observed 8, passed 1: gen_pass = 1/8. Window = first 8 observed: F P F F F F F F -> 7/8.
    // hist has no observed test -> treated as no hist: case 'gen'. |valid| = 10 -> valid_ratio 1.
    expect(r.genPass).toBe(1 / 8);
    expect(r.genFail).toBe(7 / 8);
    expect(r.case).toBe('gen');
    expect(r.validRatio).toBe(1);
    expect(r.counts.unknown).toBe(4);
    // R_test = 0.5*1 + 0.5*0.875 = 0.9375
    expect(r.rTest).toBe(0.9375);
  });

  it('caps hist at histCap', () => {
    const r = codeA1SuiteReward({ gen: [], invalidCount: 0, hist: [P, F, F], programValid: true, nonprintableRatio: 0 }, { histCap: 2 });
    // hist = [P, F] -> 1/2
    expect(r.histPass).toBe(0.5);
  });

  it('rejects inconsistent counts', () => {
    expect(() => codeA1SuiteReward({ gen: [P], validCount: 2, invalidCount: 0, hist: [], programValid: true, nonprintableRatio: 0 })).toThrow(RewardInputError);
    expect(() => codeA1SuiteReward({ gen: [P], invalidCount: -1, hist: [], programValid: true, nonprintableRatio: 0 })).toThrow(/invalidCount/);
    expect(() => codeA1SuiteReward({ gen: [], invalidCount: 0, hist: [], programValid: true, nonprintableRatio: 0 }, { alpha: 2 })).toThrow(/alpha/);
  });
});

describe('codeA1Rewards over a matrix', () => {
  // Tests: t1 t2 t3 (suite s1 of c1; t3 invalid), t4 (s2 of c1), t5 t6 (s3 of c2), h1 h2 (Mistake Book).
  const matrix = parseMatrix({
    programs: [{ id: 'ref', isReference: true }, { id: 'c1' }, { id: 'c2', valid: false }],
    tests: [
      { id: 't1', suite: 's1' },
      { id: 't2', suite: 's1' },
      { id: 't3', suite: 's1', status: 'invalid' },
      { id: 't4', suite: 's2', status: 'corrected' },
      { id: 't5', suite: 's3' },
      { id: 't6', suite: 's3' },
      { id: 'h1', suite: 'mistake-book' },
      { id: 'h2', suite: 'mistake-book' },
    ],
    verdicts: verdictsFromCodes(['AA-AAAAA', 'AW-SAAAW', 'CCCCCCCC']),
  });
  const suites = [
    { id: 's1', program: 'c1', invalidCount: 1, nonprintableRatio: 0 },
    { id: 's2', program: 'c1', invalidCount: 0, nonprintableRatio: 0.1 },
    { id: 's3', program: 'c2', invalidCount: 0, nonprintableRatio: 0 },
  ];

  it('scores each program on its own suites and the Mistake Book', () => {
    const r = codeA1Rewards({ matrix, suites });
    expect(r.rewardId).toBe('code-a1/v1');
    expect(r.programs.map((p) => p.program)).toEqual(['c1', 'c2']);
    const [c1, c2] = r.programs as [(typeof r.programs)[0], (typeof r.programs)[0]];
    const [s1, s2] = c1.suites as [(typeof c1.suites)[0], (typeof c1.suites)[0]];
    // c1/s1: gen [P, F] (t3 invalid), hist [P, F]. valid_ratio = min(2/8, 7/8) = 0.25;
    // gen_pass 0.5, gen_fail 1/8; hist_pass 0.5; pass = 0.5; attack = (0.125 - 0.5 + 1)/2 = 0.3125;
    // R_test = 0.5*0.25 + 0.5*0.3125 = 0.28125
    expect(s1.pass).toBe(0.5);
    expect(s1.attack).toBe(0.3125);
    expect(s1.rTest).toBe(0.28125);
    // c1/s2: t4 is a sandbox error -> no observed gen -> case 'hist': pass 0.5, attack 0;
    // valid_ratio = min(1/8, 1) = 0.125; R_test = -0.1 + 0.5*0.125 = -0.0375
    expect(s2.case).toBe('hist');
    expect(s2.pass).toBe(0.5);
    expect(s2.rTest).toBeCloseTo(-0.0375, 15);
    // R_code(c1) = (0.5 + 0.5)/2
    expect(c1.rCode).toBe(0.5);
    // c2 (invalid, compile errors): s3 gen [F, F], hist [F, F]: pass 0;
    // attack = (2/8 - 1 + 1)/2 = 0.125 but R_test = 0 for an invalid program.
    expect(c2.rCode).toBe(0);
    expect(c2.suites[0]!.attack).toBe(0.125);
    expect(c2.suites[0]!.rTest).toBe(0);
  });

  it('a program with no suite gets R_code from the Mistake Book alone', () => {
    const r = codeA1Rewards({ matrix, suites: suites.filter((s) => s.program !== 'c1') });
    // hist_pass(c1) = 1/2
    expect(r.programs[0]!.suites).toEqual([]);
    expect(r.programs[0]!.rCode).toBe(0.5);
  });

  it('is bit-identical across runs', () => {
    const a = codeA1Rewards({ matrix, suites });
    const b = codeA1Rewards({ matrix, suites });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
  });

  it('rejects suites naming unknown programs or listed twice', () => {
    expect(() => codeA1Rewards({ matrix, suites: [{ ...suites[0]!, program: 'zz' }] })).toThrow(/program "zz"/);
    expect(() => codeA1Rewards({ matrix, suites: [suites[0]!, suites[0]!] })).toThrow(/listed twice/);
  });
});

describe('TOPVAR', () => {
  it('keeps the program whose suite rewards vary most; ties go to the earlier program', () => {
    // population stds: [0, 0.5, 0.5, 0]
    const groups = [[0.1, 0.1], [0, 1], [1, 0], [0.5]];
    expect(topVar(groups).selected).toEqual([1]);
    expect(topVar(groups, 2).selected).toEqual([1, 2]);
    expect(topVar(groups).stds).toEqual([0, 0.5, 0.5, 0]);
    // all equal -> first program
    expect(
      topVar([
        [1, 1],
        [0, 0],
      ]).selected,
    ).toEqual([0]);
  });

  it('selects suite ids from a Code-A1 result', () => {
    const matrix = parseMatrix({
      programs: [{ id: 'a' }, { id: 'b' }],
      tests: [
        { id: 'x1', suite: 'a1' },
        { id: 'x2', suite: 'a2' },
        { id: 'y1', suite: 'b1' },
        { id: 'y2', suite: 'b2' },
      ],
      // a fails x1 and passes x2 (its suite rewards differ); b passes both of its own.
      verdicts: verdictsFromCodes(['WAAA', 'AAAA']),
    });
    const r = codeA1Rewards({
      matrix,
      suites: [
        { id: 'a1', program: 'a', invalidCount: 0, nonprintableRatio: 0 },
        { id: 'a2', program: 'a', invalidCount: 0, nonprintableRatio: 0 },
        { id: 'b1', program: 'b', invalidCount: 0, nonprintableRatio: 0 },
        { id: 'b2', program: 'b', invalidCount: 0, nonprintableRatio: 0 },
      ],
    });
    expect(codeA1TopVarSuites(r)).toEqual(['a1', 'a2']);
  });

  it('drops saturated code groups', () => {
    expect(codeA1KeepCodeGroup([1, 1, 1])).toBe(false);
    expect(codeA1KeepCodeGroup([0, 0])).toBe(false);
    expect(codeA1KeepCodeGroup([0, 1])).toBe(true);
    expect(codeA1KeepCodeGroup([0.5, 0.5])).toBe(true);
  });
});

describe('validateResponse: a whole response, read as the release reads it', () => {
  // GT: f(x) = 2 * x, raising on negative x. Stated values as the model wrote them.
  const gt = (st: { call: string; expected: string }) => {
    const x = Number(/f\((-?\d+)\)/.exec(st.call)![1]);
    if (x < 0) return { kind: 'raised' as const, exceptionType: 'ValueError' };
    return { kind: 'returned' as const, repr: String(2 * x), matchesStated: Number(st.expected) === 2 * x };
  };

  it('in a code block: every test kept, asserts that are not tests dropped without counting', () => {
    const response = [
      '```python',
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((x) => `assert f(${x}) == ${2 * x}`),
      'assert f(3) == 7',
      'assert f(-1) == 0',
      'assert f(11)',
      'assert f(12) != 1',
      '```',
    ].join('\n');
    const v = validateResponse(response, gt);
    // 12 tests (10 right, f(3) == 7 corrected to 6 and so a duplicate of f(3) == 6, f(-1) raises);
    // `assert f(11)` and `assert f(12) != 1` are not read as tests.
    expect(v.total).toBe(12);
    expect(v.validCount).toBe(10);
    // duplicate (+1) and GT raising (+1); the duplicate's stated value is not compared again.
    expect(v.invalidCount).toBe(2);
  });

  it('outside a code block: every assert line counts, malformed ones as invalid', () => {
    const response = ['Tests:', 'assert f(1) == 2', 'assert f(2) == 5', 'assert f(11)', 'assert f(12) != 1', 'assert f(', 'f(3) == 6'].join('\n');
    const v = validateResponse(response, gt);
    // 5 assert lines; f(2) == 5 is corrected (invalid, used); three malformed lines (the release
    // would read `assert f(12) != 1` as `== 1`: a corrected test, valid 3, invalid 3).
    expect([v.total, v.validCount, v.invalidCount]).toEqual([5, 2, 4]);
  });
});
