/**
 * Every reference solution the repository can reach is accepted on its own tests by the real
 * sandbox, under bubblewrap where it works here: HumanEval's 164 canonical solutions on their
 * `check`, the APPS references, the dataset fixtures (MBPP, MBPP+, HumanEval+, LiveCodeBench,
 * CodeContests, TACO, APPS, EvolveCoder, CURE formats; problems written for these tests) and
 * the demo problems. A failure names the first reference that is not accepted.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Problem } from '../../src/core/problem.js';
import { checkProblems } from '../../src/datasets/check.js';
import { loadDemo } from '../../src/datasets/demo/index.js';
import { loadDataset } from '../../src/datasets/loaders/index.js';
import { fillExpected } from '../../src/datasets/oracle.js';
import type { Sandbox } from '../../src/sandbox/api.js';
import { createSandbox, SERVER_PATH } from '../../src/sandbox/index.js';
import { BWRAP } from '../support/bwrap.js';
import { DATASETS, HAVE_DATASETS, NO_DATASETS } from '../support/datasets.js';

const FIX = join(import.meta.dirname, '../fixtures/datasets');

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await createSandbox({ workers: 4, isolation: BWRAP ? 'bwrap' : 'none', warn: () => {} });
});
afterAll(async () => {
  await sandbox?.close();
});

/** Runs every reference of every problem; -> the first one not accepted, described. */
async function firstRejected(problems: Problem[]): Promise<string | undefined> {
  const report = await checkProblems(problems, sandbox, { solutions: 1_000, incorrect: 0, concurrency: 4 });
  const bad = report.failingReferences[0];
  if (bad)
    return `${bad.id} reference ${bad.solution}: ${bad.failures
      .slice(0, 2)
      .map((f) => `${f.bucket}[${f.index}] ${f.verdict} ${f.exceptionType ?? ''} ${f.message ?? ''}`)
      .join('; ')}`;
  const unsure = report.inconclusive[0];
  if (unsure) return `${unsure.id}: inconclusive (${unsure.reason})`;
  return undefined;
}

const load = async (format: string, file: string) => (await loadDataset(format, file)).problems;
/** Fixture problems planted to test `data check` itself, not references to hold to. */
const PLANTED = new Map([
  ['codecontests/9001_B. Largest', 'a wrong reference that `data check` must report'],
  ['taco/5', 'several answers are right: it needs the special judge the dataset does not give'],
]);

describe('every reference solution is accepted', () => {
  it('runs under bubblewrap where bubblewrap works', () => {
    expect(sandbox.isolation).toBe(BWRAP ? 'bwrap' : 'rlimits');
  });

  it.skipIf(!HAVE_DATASETS)(
    `HumanEval: all 164 canonical solutions on their own check ${HAVE_DATASETS ? '' : `(skipped: ${NO_DATASETS})`}`,
    async () => {
      const problems = await load('humaneval', join(DATASETS, 'humaneval/HumanEval.jsonl.gz'));
      expect(problems).toHaveLength(164);
      expect(await firstRejected(problems)).toBeUndefined();
    },
    600_000,
  );

  it.skipIf(!HAVE_DATASETS)(
    `APPS sample: every reference on its tests ${HAVE_DATASETS ? '' : `(skipped: ${NO_DATASETS})`}`,
    async () => {
      const problems = await load('apps', join(DATASETS, 'apps_sample'));
      expect(problems.length).toBeGreaterThan(0);
      expect(await firstRejected(problems)).toBeUndefined();
    },
    300_000,
  );

  for (const [format, file] of [
    ['mbpp', 'mbpp.jsonl'],
    ['mbpp-plus', 'mbppplus.jsonl'],
    ['humaneval-plus', 'humanevalplus.jsonl'],
    ['livecodebench', 'livecodebench.jsonl'],
    ['codecontests', 'codecontests.jsonl'],
    ['taco', 'taco.jsonl'],
    ['apps', 'apps.jsonl'],
    ['evolvecoder', 'evolvecoder22k.jsonl'],
    ['cure', 'cure.json'],
  ] as const) {
    it(`${format} fixture: every reference on its tests`, async () => {
      const raw = await load(format, join(FIX, file));
      // Inputs without expected outputs (HumanEval+, MBPP+) are filled by the reference first.
      const problems = await Promise.all(raw.filter((p) => !PLANTED.has(p.id)).map(async (p) => (await fillExpected(p, sandbox)).problem));
      expect(problems.length).toBeGreaterThan(0);
      expect(await firstRejected(problems)).toBeUndefined();
    }, 300_000);
  }

  it('demo problems: every reference on its tests', async () => {
    const problems = loadDemo().map((d) => d.problem);
    expect(problems.length).toBeGreaterThan(0);
    expect(await firstRejected(problems)).toBeUndefined();
  }, 300_000);
});
