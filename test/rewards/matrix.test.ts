import { describe, expect, it } from 'vitest';
import {
  RewardInputError,
  inferProgramValid,
  outcomeOf,
  parseMatrix,
  passVector,
  programPassCount,
  programSignature,
  sandboxErrorCount,
  testSignature,
  verdictsFromCodes,
} from '../../src/rewards/matrix.js';
import { VERDICTS } from '../../src/core/verdicts.js';
import { REWARD_IDS, RewardIdSchema, getRewardFunction } from '../../src/rewards/index.js';
import { codeA1Rewards } from '../../src/rewards/code-a1.js';

describe('execution matrix', () => {
  it('maps the 8 verdicts to outcomes; sandbox_error and not-run are unknown', () => {
    expect(VERDICTS.map((v) => outcomeOf(v))).toEqual(['pass', 'fail', 'fail', 'fail', 'fail', 'fail', 'fail', 'unknown']);
    expect(outcomeOf(null)).toBe('unknown');
  });

  const m = parseMatrix({
    programs: [{ id: 'p0' }, { id: 'p1' }],
    tests: [
      { id: 'a', suite: 's' },
      { id: 'b', suite: 's' },
      { id: 'c', suite: 's' },
    ],
    verdicts: verdictsFromCodes(['AWS', 'C-A']),
  });

  it('helpers: vectors, signatures, counts, validity', () => {
    expect(passVector(m, 0)).toEqual(['pass', 'fail', 'unknown']);
    expect(programSignature(m, 0)).toBe('10?');
    expect(testSignature(m, 2)).toBe('?1');
    // p0: passed 1 of 2 observed
    expect(programPassCount(m, 0)).toEqual({ passed: 1, failed: 1, unknown: 1, observed: 2, rate: 0.5 });
    expect(inferProgramValid(m, 0)).toBe(true);
    expect(inferProgramValid(m, 1)).toBe(false);
    expect(sandboxErrorCount(m)).toBe(1);
    // defaults are filled in
    expect(m.programs[0]).toEqual({ id: 'p0', isReference: false, valid: true });
    expect(m.tests[0]!.status).toBe('valid');
  });

  it('bad matrices get one clear error naming each problem and where', () => {
    const badVerdict = () => parseMatrix({ programs: [{ id: 'p' }], tests: [{ id: 't', suite: 's' }], verdicts: [['passed']] });
    expect(badVerdict).toThrow(RewardInputError);
    expect(badVerdict).toThrow(/invalid execution matrix: verdicts\.0\.0: /);
    // Shape problems are all reported together.
    const badShape = () =>
      parseMatrix({
        programs: [{ id: 'p' }, { id: 'p' }],
        tests: [{ id: 't', suite: 's' }],
        verdicts: [['accepted', 'accepted'], ['accepted']],
      });
    expect(badShape).toThrow(/verdicts\.0: has 2 cells but there are 1 tests/);
    expect(badShape).toThrow(/programs\.1\.id: duplicate id "p"/);
    expect(() => verdictsFromCodes(['AX'])).toThrow(/"X" at row 0, column 1/);
  });
});

describe('reward registry', () => {
  it('names versioned reward functions for configs', () => {
    expect(REWARD_IDS).toEqual(['ace/v1', 'code-a1/v1', 'cure-post-stage/v1', 'cure/v1', 'tcs/v1']);
    expect(getRewardFunction('code-a1/v1')).toBe(codeA1Rewards);
    expect(RewardIdSchema.parse('cure/v1')).toBe('cure/v1');
    expect(() => getRewardFunction('code-a1/v9')).toThrow(/unknown reward function "code-a1\/v9"; known: ace\/v1, code-a1\/v1/);
  });
});
