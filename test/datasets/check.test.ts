/** `data check` and the oracle against the real sandbox (real python3 fork-servers). */
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkProblem, checkProblems } from '../../src/datasets/check.js';
import { loadDataset } from '../../src/datasets/loaders/index.js';
import { fillExpected } from '../../src/datasets/oracle.js';
import type { Problem } from '../../src/core/problem.js';
import type { Sandbox } from '../../src/sandbox/api.js';
import { createSandbox } from '../../src/sandbox/index.js';
import { DATASETS, HAVE_DATASETS } from '../support/datasets.js';

const SHARED = DATASETS;
const FIX = join(import.meta.dirname, '../fixtures/datasets');

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await createSandbox({ workers: 2, warn: () => {} });
});
afterAll(async () => {
  await sandbox?.close();
});

const load = async (format: string, path: string) => (await loadDataset(format, path)).problems;

describe('data check on real records', () => {
  it.skipIf(!HAVE_DATASETS)('HumanEval: references pass, planted wrong programs are caught, a wrong reference is reported', async () => {
    const problems = (await load('humaneval', join(SHARED, 'humaneval/HumanEval.jsonl.gz'))).slice(0, 8);
    const planted: Problem[] = problems.map((p) => ({ ...p, incorrectSolutions: [`${p.statement}    return None\n`] }));
    // HumanEval/1's program as HumanEval/0's reference: it defines the wrong function.
    planted[0] = { ...planted[0]!, solutions: [problems[1]!.solutions[0]!] };
    const report = await checkProblems(planted, sandbox);
    expect(report.checked).toBe(8);
    expect(report.inconclusive).toEqual([]);
    expect(report.failingReferences.map((f) => f.id)).toEqual(['humaneval/HumanEval/0']);
    expect(report.failingReferences[0]!.failures[0]).toMatchObject({ bucket: 'private', index: 0 });
    expect(report.passingIncorrect).toEqual([]);
  });

  it.skipIf(!HAVE_DATASETS)("APPS sample: the references pass and CodeRL's wrong-answer programs are all caught", async () => {
    const problems = await load('apps', join(SHARED, 'apps_sample'));
    const checks = await Promise.all(problems.map((p) => checkProblem(p, sandbox, { solutions: 3, incorrect: 10 })));
    for (const c of checks) {
      expect(c.error).toBeUndefined();
      expect(c.references.map((r) => [r.passed, r.failures])).toEqual([
        [true, []],
        [true, []],
        [true, []],
      ]);
      expect(c.incorrect.length).toBeGreaterThan(0);
      expect(c.incorrect.every((r) => !r.passed && r.sandboxErrors === 0)).toBe(true);
    }
  });

  it.skipIf(!HAVE_DATASETS)('EvolveCoder prototype: nothing to run without reference or incorrect programs', async () => {
    const problems = await load('evolvecoder', join(SHARED, 'evolvecoder_prototype_round0/step2.2_eval_gpt_4.1_mini_seed42_round0.jsonl'));
    const report = await checkProblems(problems, sandbox);
    expect(report.checked).toBe(0);
    expect(report.skipped.map((s) => s.reason)).toEqual(Array(4).fill('no reference or incorrect solutions'));
  });
});

describe('data check on fixtures', () => {
  it('CodeContests: reports the failing reference and the incorrect solution the weak tests let pass', async () => {
    const report = await checkProblems(await load('codecontests', join(FIX, 'codecontests.jsonl')), sandbox);
    expect(report.failingReferences).toEqual([
      {
        id: 'codecontests/9001_B. Largest',
        solution: 0,
        failed: 1,
        failures: [{ bucket: 'private', index: 1, verdict: 'wrong_answer' }],
      },
    ]);
    expect(report.passingIncorrect).toEqual([{ id: 'codecontests/9001_B. Largest', solution: 0 }]);
  });

  it.skipIf(!HAVE_DATASETS)('TACO: a special-judge problem without a checker is skipped, not judged', async () => {
    const { readSpecialJudge } = await import('../../src/datasets/loaders/index.js');
    const { problems } = await loadDataset('taco', join(FIX, 'taco.jsonl'), {
      specialJudge: await readSpecialJudge(join(SHARED, 'extras/taco_test_output_spj.jsonl')),
    });
    const report = await checkProblems(problems, sandbox);
    expect(report.skipped).toEqual([{ id: 'taco/5', reason: 'needs a checker and the dataset gives none' }]);
    expect(report.failingReferences).toEqual([]);
    expect(report.checked).toBe(4);
  });

  it('a request the sandbox refuses is reported as inconclusive, not as a verdict', async () => {
    const [p] = await load('humaneval-plus', join(FIX, 'humanevalplus.jsonl'));
    const c = await checkProblem({ ...p!, entryPoint: undefined }, sandbox);
    expect(c.error).toMatch(/entryPoint/);
  });
});

describe('oracle: expected values from the canonical solution', () => {
  it('HumanEval+: fills base and plus inputs, drops the input the reference fails on', async () => {
    const [div, rep] = await load('humaneval-plus', join(FIX, 'humanevalplus.jsonl'));
    const r = await fillExpected(div!, sandbox);
    expect(r.dropped).toEqual([{ bucket: 'generated', index: 1, reason: 'reference runtime_error (ZeroDivisionError: division by zero)' }]);
    expect(r.unfilled).toEqual([]);
    expect(r.filled).toBe(4);
    expect(r.problem.tests.private).toEqual([
      { style: 'call', args: [6, 3], expected: 2 },
      { style: 'call', args: [1, 4], expected: 0.25 },
    ]);
    expect(r.problem.tests.generated.map((t) => (t as { expected: unknown }).expected)).toEqual([3.5, 1e19]);
    const r2 = await fillExpected(rep!, sandbox);
    expect(r2.problem.tests.generated).toEqual([
      { style: 'call', args: ['', 5], expected: '' },
      { style: 'call', args: ['x', 0], expected: '' },
    ]);
    // Filled problems now judge programs: the reference passes, a wrong one fails.
    const checked = await checkProblem({ ...r2.problem, incorrectSolutions: ['def repeat(s, n):\n    return s * (n + 1)\n'] }, sandbox);
    expect(checked.references[0]!.passed).toBe(true);
    expect(checked.incorrect[0]!.passed).toBe(false);
  });

  it('MBPP+: fills from a whole-program canonical solution', async () => {
    const [common] = await load('mbpp-plus', join(FIX, 'mbppplus.jsonl'));
    const r = await fillExpected(common!, sandbox);
    expect(r.filled).toBe(3);
    expect(r.problem.tests.generated.map((t) => (t as { expected: unknown }).expected)).toEqual([[], [5, 6]]);
  });

  it('does nothing without a reference, and nothing when every test has its expected value', async () => {
    const [div] = await load('humaneval-plus', join(FIX, 'humanevalplus.jsonl'));
    expect((await fillExpected({ ...div!, solutions: [] }, sandbox)).skipped).toBe('no reference solution to compute expected outputs');
    const [cc] = await load('codecontests', join(FIX, 'codecontests.jsonl'));
    const r = await fillExpected(cc!, sandbox);
    expect(r).toEqual({ problem: cc, filled: 0, dropped: [], unfilled: [] });
  });
});
