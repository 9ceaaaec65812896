/**
 * The catalog policies learn, without the actors: sample programs and white-box suites, score
 * them on a real python execution matrix (reference = oracle; a test the reference rejects is
 * invalid), GRPO-normalize per problem, train both policies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withExpectedOutput } from '../../src/core/problem.js';
import { loadDemo } from '../../src/datasets/demo/index.js';
import { buildCatalogUniverse, type CatalogUniverse } from '../../src/datasets/demo/catalog/index.js';
import { CatalogPolicy } from '../../src/policies/catalog/index.js';
import { createSandbox, type Sandbox } from '../../src/sandbox/index.js';
import type { TrainSample } from '../../src/policies/port.js';

const IDS = ['demo/count-pairs-sum', 'demo/max-subarray-sum', 'demo/range-sum'];
const demo = loadDemo().filter((d) => IDS.includes(d.problem.id));
let universe: CatalogUniverse;
/** pass[problemId][candidateId][testId]: accepted on a valid test; valid[problemId][testId]. */
const pass: Record<string, Record<string, Record<string, boolean>>> = {};
const valid: Record<string, Record<string, boolean>> = {};

function grpo(rewards: number[]): number[] {
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / rewards.length);
  return rewards.map((r) => (r - mean) / (std + 1e-6));
}

let sandbox: Sandbox;

beforeAll(async () => {
  sandbox = await createSandbox({ warn: () => {} });
  universe = await buildCatalogUniverse(demo, sandbox, { programs: { maxMutants: 6 }, tests: { count: 32 } });
  for (const { problem } of demo) {
    const programs = universe.programs[problem.id]!;
    const tests = universe.tests[problem.id]!;
    const run = (program: string, ts: (typeof tests)[number]['test'][]) =>
      sandbox.run({ program, tests: ts, entryPoint: problem.entryPoint, limits: problem.limits, comparison: problem.comparison });
    // The reference is the oracle: a test it rejects is invalid, its output is the expected value.
    const ref = await run(
      problem.solutions[0]!,
      tests.map((t) => t.test),
    );
    const oracle = tests.map((t, i) => {
      const r = ref.find((x) => x.test === i);
      return r?.verdict === 'accepted' && r.output !== undefined ? withExpectedOutput(t.test, r.output) : null;
    });
    valid[problem.id] = Object.fromEntries(tests.map((t, i) => [t.testId, oracle[i] !== null]));
    const judged = oracle.flatMap((t, i) => (t ? [{ i, t }] : []));
    pass[problem.id] = {};
    await Promise.all(
      programs.map(async (c) => {
        const res = await run(
          c.program,
          judged.map((j) => j.t),
        );
        const ok = new Set(res.filter((r) => r.verdict === 'accepted').map((r) => judged[r.test]!.i));
        pass[problem.id]![c.candidateId] = Object.fromEntries(tests.map((t, i) => [t.testId, ok.has(i)]));
      }),
    );
  }
}, 120_000);

afterAll(async () => {
  await sandbox?.close();
});

describe('catalog policies under co-evolution', () => {
  it('move probability mass to correct programs and to valid, killing tests', async () => {
    const code = new CatalogPolicy('code', universe);
    const test = new CatalogPolicy('test', universe, { suiteSize: 6 });
    const correctMass = () =>
      demo.map(({ problem }) => {
        const dist = code.distribution(problem.id);
        return universe.programs[problem.id]!.filter((c) => c.correct).reduce((s, c) => s + dist.get(c.candidateId)!, 0);
      });
    const before = correctMass();
    let validFirst = 0;
    let validLast = 0;
    const steps = 25;
    for (let step = 0; step < steps; step++) {
      const prompts = demo.map(({ problem }) => ({ key: problem.id, prompt: problem.statement, context: { problemId: problem.id } }));
      const programs = await code.generate({ role: 'code', version: code.version, seed: step, n: 8, prompts });
      const suites = await test.generate({
        role: 'test',
        version: test.version,
        seed: 1000 + step,
        n: 1,
        prompts: programs.map((g, i) => ({ key: `${g.promptKey}/${i}`, prompt: g.text, context: { problemId: g.promptKey, target: g.choiceKey! } })),
      });
      const codeSamples: TrainSample[] = [];
      const testSamples: TrainSample[] = [];
      let validCount = 0;
      for (const { problem } of demo) {
        const mine = programs.map((g, i) => ({ g, s: suites[i]! })).filter((x) => x.g.promptKey === problem.id);
        const scored = mine.map(({ g, s }) => {
          const ids = s.choiceKey!.split(',');
          const ok = ids.filter((id) => valid[problem.id]![id]);
          validCount += ok.length;
          const passed = ok.filter((id) => pass[problem.id]![g.choiceKey!]![id]).length;
          const passRate = ok.length ? passed / ok.length : 0;
          return { g, s, passRate, attack: ok.length / ids.length / 2 + (ok.length ? (ok.length - passed) / ok.length / 2 : 0) };
        });
        grpo(scored.map((x) => x.passRate)).forEach((a, i) =>
          codeSamples.push({ prompt: '', response: scored[i]!.g.text, advantage: a, contextKey: scored[i]!.g.contextKey, choiceKey: scored[i]!.g.choiceKey }),
        );
        grpo(scored.map((x) => x.attack)).forEach((a, i) =>
          testSamples.push({ prompt: '', response: scored[i]!.s.text, advantage: a, contextKey: scored[i]!.s.contextKey, choiceKey: scored[i]!.s.choiceKey }),
        );
      }
      if (step === 0) validFirst = validCount;
      if (step === steps - 1) validLast = validCount;
      await code.trainStep({
        batchId: `code-${step}`,
        role: 'code',
        expectedVersion: code.version,
        algorithm: 'grpo',
        samples: codeSamples,
        hyper: { lr: 0.3 },
      });
      await test.trainStep({
        batchId: `test-${step}`,
        role: 'test',
        expectedVersion: test.version,
        algorithm: 'grpo',
        samples: testSamples,
        hyper: { lr: 0.3 },
      });
    }
    const after = correctMass();
    process.stdout.write(
      `correct mass before ${before.map((m) => m.toFixed(2)).join(' ')} after ${after.map((m) => m.toFixed(2)).join(' ')}; valid tests per round ${validFirst} -> ${validLast}\n`,
    );
    after.forEach((m, i) => expect(m, IDS[i]).toBeGreaterThan(before[i]! + 0.2));
    expect(validLast).toBeGreaterThan(validFirst);
    expect(code.version).toBe(steps);
  });
});
