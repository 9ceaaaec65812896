import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type Sandbox } from '../../src/sandbox/index.js';
import type { TestCase } from '../../src/core/problem.js';
import { DATASETS as datasets, HAVE_DATASETS, NO_DATASETS } from '../support/datasets.js';

/** Agreement with labels that nobody on this project wrote (CRUCIBLE_DATASETS). Small local
 * readers on purpose: the official loaders live in src/datasets/loaders. */
const readJson = (p: string): any => JSON.parse(readFileSync(path.join(datasets, p), 'utf8'));

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await createSandbox({ workers: 2, warn: () => undefined });
});
afterAll(async () => sandbox.close());

if (!HAVE_DATASETS) process.stdout.write(`agreement tests skipped: ${NO_DATASETS}\n`);

describe.skipIf(!HAVE_DATASETS)('APPS gen_solutions labels', () => {
  for (const id of ['0001', '2404']) {
    it(`apps ${id}: every labelled program gets its label`, async () => {
      const io = readJson(`apps_sample/${id}/input_output.json`);
      const gens = readJson(`apps_sample/${id}/gen_solutions.json`) as Array<{ code: string; result: boolean | number }>;
      const tests: TestCase[] = io.fn_name
        ? io.inputs.map((a: unknown[], i: number) => ({ style: 'call', args: a, expected: io.outputs[i] }))
        : io.inputs.map((inp: string, i: number) => ({ style: 'stdio', input: inp, output: io.outputs[i] }));
      const mismatches: string[] = [];
      for (const [k, g] of gens.entries()) {
        const r = await sandbox.run({ program: g.code, tests, entryPoint: io.fn_name, limits: { timeSeconds: 4 } });
        const v = r.map((x) => x.verdict);
        // APPS: true passed, false wrong answer, -1 runtime error or timeout, -2 compile error
        // (its harness loads the module first: a top level that raises is -2 too, phase 'load').
        const ours = v.every((x) => x === 'accepted')
          ? true
          : r.some((x) => x.verdict === 'compile_error' || (x.verdict === 'runtime_error' && x.phase === 'load'))
            ? -2
            : v.some((x) => ['runtime_error', 'time_limit', 'memory_limit'].includes(x))
              ? -1
              : false;
        if (ours !== g.result) mismatches.push(`program ${k}: label ${g.result}, ours ${v.join(',')}`);
      }
      expect(mismatches).toEqual([]);
    });
  }
});

describe.skipIf(!HAVE_DATASETS)('EvolveCoder round-0 per-test pass status', () => {
  const lines = !HAVE_DATASETS
    ? []
    : readFileSync(path.join(datasets, 'evolvecoder_prototype_round0/step2.2_eval_gpt_4.1_mini_seed42_round0.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
  const stats = { agree: 0, total: 0 };
  for (const rec of lines) {
    it(`problem ${rec.id}: verdicts agree with the labels, or the disagreement is explained`, async () => {
      const tests: TestCase[] = rec.synthesis_result.tests.map((code: string) => ({ style: 'assert', code }));
      const unexplained: string[] = [];
      for (const [k, e] of (rec.gen_result.eval_results as any[]).entries()) {
        const r = await sandbox.run({ program: e.parse_code, tests, limits: { timeSeconds: 1 } });
        expect(r).toHaveLength(tests.length);
        (e.test_cases_pass_status as Array<{ pass: boolean; reason: string }>).forEach((s, j) => {
          stats.total++;
          const ours = r[j]!;
          if ((ours.verdict === 'accepted') === s.pass) return void stats.agree++;
          // Explained (see src/sandbox/README.md): program 17 of problem 0 is cut off mid-line
          // (the model hit its length limit) and cannot compile as stored; the label came from
          // a run of other text. Test 6 of problem 4 is a 10^6-step loop: at a 1 s limit its
          // verdict is a machine's speed, theirs (a timeout label) or this one's under load (our
          // time limit where they passed).
          if (rec.id === 0 && k === 17 && ours.verdict === 'compile_error' && s.pass) return;
          if (rec.id === 4 && j === 6 && (s.reason === 'timeout' || ours.verdict === 'time_limit')) return;
          unexplained.push(`program ${k} test ${j}: label ${s.reason}, ours ${ours.verdict} ${ours.exceptionType ?? ''} ${ours.message ?? ''}`);
        });
      }
      expect(unexplained).toEqual([]);
    }, 120_000);
  }
  afterAll(() => {
    process.stdout.write(`EvolveCoder agreement: ${stats.agree}/${stats.total} = ${((100 * stats.agree) / stats.total).toFixed(2)}%\n`);
  });
});
