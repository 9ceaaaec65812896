import { describe, expect, it } from 'vitest';
import { groupAdvantages, groupedAdvantages, zNormalize } from '../../src/rewards/grpo.js';

describe('group-normalized advantages', () => {
  it('sample std (verl GRPO default)', () => {
    // mean 0.5; squared deviations 4 * 0.25 = 1; sample std = sqrt(1/3)
    const std = Math.sqrt(1 / 3);
    expect(groupAdvantages([1, 0, 0, 1])).toEqual([0.5 / (std + 1e-6), -0.5 / (std + 1e-6), -0.5 / (std + 1e-6), 0.5 / (std + 1e-6)]);
  });

  it('population std and no std', () => {
    // population std = sqrt(1/4) = 0.5
    expect(groupAdvantages([1, 0, 0, 1], { std: 'population' })).toEqual([0.5 / 0.500001, -0.5 / 0.500001, -0.5 / 0.500001, 0.5 / 0.500001]);
    expect(groupAdvantages([3, 1], { std: 'none' })).toEqual([1, -1]);
    expect(zNormalize([2, 4, 6])).toEqual(groupAdvantages([2, 4, 6], { std: 'population', eps: 1e-6 }));
  });

  it('all-equal groups of two or more get exact zeros', () => {
    // mean of three 0.1s is 0.10000000000000002, so r - mean would not be 0 without the rule.
    expect(groupAdvantages([0.1, 0.1, 0.1])).toEqual([0, 0, 0]);
    expect(groupAdvantages([0.7, 0.7])).toEqual([0, 0]);
    expect(groupAdvantages([])).toEqual([]);
  });

  it("a group of one sample: verl's mean 0 and std 1, so the advantage is the reward (over 1 + eps)", () => {
    // verl compute_grpo_outcome_advantage: (0.7 - 0) / (1 + 1e-6); the release casts it to
    // bf16, where it is 0.7's own bf16 value.
    expect(groupAdvantages([0.7])).toEqual([0.7 / 1.000001]);
    expect(groupAdvantages([0.7], { std: 'population' })).toEqual([0.7 / 1.000001]);
    expect(groupAdvantages([0.7], { std: 'none' })).toEqual([0.7]);
    expect(groupAdvantages([-0.25], { eps: 0 })).toEqual([-0.25]);
    expect(Object.is(groupAdvantages([-0])[0], 0)).toBe(true);
  });

  it('groups by id and returns input order', () => {
    const adv = groupedAdvantages(
      [
        { group: 'b', reward: 1 },
        { group: 'a', reward: 5 },
        { group: 'b', reward: 0 },
        { group: 'a', reward: 5 },
      ],
      { std: 'none' },
    );
    expect(adv).toEqual([0.5, 0, -0.5, 0]);
  });

  it('rejects non-finite rewards', () => {
    expect(() => groupAdvantages([1, Number.NaN])).toThrow(/reward 1/);
  });
});
