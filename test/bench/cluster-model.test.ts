import { describe, expect, it } from 'vitest';
import { bestJudgeShares, CapacityInputError, nodesWhereRoleBounds, predictStep, stepWork, type SerialRole } from '../../bench/cluster-model.js';

// Hand-made figures: 400,000 results in 4,000 programs; 2 core-ms of sandbox per pair, 1 ms of
// log per program; every judge folds at 10 us per result, judging is 40 us per result to split;
// the Learner 5 us per result.
const work = { results: 400_000, programs: 4_000 };
const figures = { sandboxMsPerPair: 2, roundTripMsPerProgram: 1 };
const roles = (shares: number): SerialRole[] => [
  { name: 'judge', usPerResult: 10, splitUsPerResult: 40, shares },
  { name: 'learner', usPerResult: 5, splitUsPerResult: 0, shares: 1 },
];

describe('the capacity model', () => {
  it('computes a step from the config shape: 256 problems x 8 x 8 x 8 at 3.14 results per pair', () => {
    const w = stepWork({ problems: 256, groupSize: 8, suitesPerProgram: 8, suiteSize: 8, resultsPerNominalPair: 3.14, programsPerNominalPair: 0.01 });
    expect(w.results).toBeCloseTo(411_566.08, 6);
    expect(w.programs).toBeCloseTo(1_310.72, 6);
  });

  it('spreads the executors over every core less what the serial roles take', () => {
    const p = predictStep(work, figures, roles(1), { nodes: 1, cores: 16 });
    // 800 core-s of sandbox + 4 of log + 20 of the Judge + 2 of the Learner over 16 cores.
    expect(p.stages.executors).toBeCloseTo(826 / 16, 9);
    expect(p.sandboxSeconds).toBeCloseTo(50, 9);
    expect(p.logSeconds).toBeCloseTo(0.25, 9);
    expect(p.stages.judge).toBeCloseTo(20, 9);
    expect(p.stages.learner).toBeCloseTo(2, 9);
    expect(p.bottleneck).toBe('executors');
    expect(p.seconds).toBeCloseTo(826 / 16, 9);
  });

  it('moves the bottleneck from the executors to the Judge as nodes are added', () => {
    const at = (nodes: number) => predictStep(work, figures, roles(1), { nodes, cores: 16 });
    expect(at(2).bottleneck).toBe('executors');
    expect(at(2).seconds).toBeCloseTo(826 / 32, 9);
    expect(at(4).bottleneck).toBe('judge');
    expect(at(4).seconds).toBeCloseTo(20, 9);
    expect(at(16).seconds).toBeCloseTo(20, 9);
    // 826 core-s over 16 N cores falls under the Judge's 20 s from N = 3.
    expect(nodesWhereRoleBounds(work, figures, roles(1), 16)).toBe(3);
    expect(nodesWhereRoleBounds(work, figures, roles(1), 16, 2)).toBeNull();
  });

  it('divides only the judging among K shares: each judge still folds the whole log', () => {
    const p = predictStep(work, figures, roles(4), { nodes: 4, cores: 16 });
    // One judge: 400,000 x (10 + 40 / 4) us; four folds and the judging once in the cores' total.
    expect(p.stages.judge).toBeCloseTo(8, 9);
    expect(p.stages.executors).toBeCloseTo((800 + 4 + 0.4 * (10 * 4 + 40) + 2) / 64, 9);
    expect(p.bottleneck).toBe('executors');
    // At 16 nodes the Judge bounds the step at any K; its floor is the unsplit fold (4 s).
    const wide = predictStep(work, figures, roles(16), { nodes: 16, cores: 16 });
    expect(wide.stages.judge).toBeCloseTo(4 + 1, 9);
    expect(bestJudgeShares(work, figures, roles, { nodes: 1, cores: 16 })).toBe(1);
    expect(bestJudgeShares(work, figures, roles, { nodes: 16, cores: 16 })).toBeGreaterThan(8);
  });

  it('refuses bad input, naming what is wrong', () => {
    expect(() => predictStep(work, figures, roles(1), { nodes: 0, cores: 16 })).toThrow(/nodes must be a positive integer, got 0/);
    expect(() => predictStep(work, figures, roles(1), { nodes: 1.5, cores: 16 })).toThrow(CapacityInputError);
    expect(() => predictStep(work, figures, roles(17), { nodes: 1, cores: 16 })).toThrow(/judge: at most 16 shares, got 17/);
    expect(() => predictStep(work, { ...figures, sandboxMsPerPair: Number.NaN }, roles(1), { nodes: 1, cores: 2 })).toThrow(/sandbox ms per pair/);
    expect(() => predictStep(work, figures, [{ name: 'learner', usPerResult: 5, splitUsPerResult: 0, shares: 2 }], { nodes: 1, cores: 2 })).toThrow(
      /learner: 2 shares of a role with no work to split/,
    );
    expect(() => stepWork({ problems: 0, groupSize: 8, suitesPerProgram: 8, suiteSize: 8, resultsPerNominalPair: 3, programsPerNominalPair: 0.01 })).toThrow(
      /step shape: problems must be a positive integer, got 0/,
    );
  });
});
