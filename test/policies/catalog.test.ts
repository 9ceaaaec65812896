import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDemo } from '../../src/datasets/demo/index.js';
import {
  buildProgramCatalog,
  buildTestCatalog,
  catalogSource,
  testKey,
  type CatalogUniverse,
  type ProgramCandidate,
} from '../../src/datasets/demo/catalog/index.js';
import { CatalogPolicy, logprobGradient, parseSuite, softmax } from '../../src/policies/catalog/index.js';
import { createSandbox, type Sandbox } from '../../src/sandbox/index.js';
import { PolicyInputError, VersionError, type TrainStepRequest } from '../../src/policies/port.js';

const demo = loadDemo();
const pairs = demo.find((d) => d.problem.id === 'demo/count-pairs-sum')!;
const rangeSum = demo.find((d) => d.problem.id === 'demo/range-sum')!;

function handUniverse(): CatalogUniverse {
  const programs: ProgramCandidate[] = [
    { candidateId: 'ref', program: 'print(1)', kind: 'reference', correct: true },
    { candidateId: 'bug:a', program: 'print(2)', kind: 'bug', correct: false },
    { candidateId: 'bug:b', program: 'print(3)', kind: 'bug', correct: false },
  ];
  return { programs: { p: programs }, tests: { p: buildTestCatalog(catalogSource(pairs), { count: 20 }) }, validTests: { p: [] } };
}

const step = (over: Partial<TrainStepRequest> = {}): TrainStepRequest => ({
  batchId: 'b1',
  role: 'code',
  expectedVersion: 0,
  algorithm: 'grpo',
  samples: [
    { prompt: '', response: '', advantage: 1, contextKey: 'p', choiceKey: 'ref' },
    { prompt: '', response: '', advantage: -1, contextKey: 'p', choiceKey: 'bug:a' },
  ],
  hyper: { lr: 0.5 },
  ...over,
});

describe('softmax math', () => {
  it('gives the plain softmax gradient for one pick and a zero-sum Plackett-Luce gradient for a suite', () => {
    const logits = [0.3, -1, 2];
    const p = softmax(logits);
    expect(logprobGradient(logits, [1]).map((g) => +g.toFixed(12))).toEqual([-p[0]!, 1 - p[1]!, -p[2]!].map((g) => +g.toFixed(12)));
    const g = logprobGradient(logits, [2, 0]);
    expect(g.reduce((a, b) => a + b, 0)).toBeCloseTo(0, 12);
    expect(g[1]!).toBeLessThan(0);
  });
});

describe('catalog policy', () => {
  it('samples deterministically from the seed, one candidate per generation', async () => {
    const policy = new CatalogPolicy('code', handUniverse());
    const req = { role: 'code' as const, version: 0, seed: 42, n: 16, prompts: [{ key: 'k', prompt: '...', context: { problemId: 'p' } }] };
    const a = await policy.generate(req);
    const b = await policy.generate(req);
    expect(a).toEqual(b);
    expect(a).toHaveLength(16);
    expect(new Set(a.map((g) => g.choiceKey)).size).toBeGreaterThan(1);
    for (const g of a) expect(g.logprob).toBeCloseTo(Math.log(1 / 3), 12);
    const c = await policy.generate({ ...req, seed: 43 });
    expect(c.map((g) => g.choiceKey)).not.toEqual(a.map((g) => g.choiceKey));
  });

  it('draws a suite of distinct tests, as JSON lines whose ids are in choiceKey', async () => {
    const policy = new CatalogPolicy('test', handUniverse(), { suiteSize: 5 });
    const [g] = await policy.generate({
      role: 'test',
      version: 0,
      seed: 1,
      n: 1,
      prompts: [{ key: 'k', prompt: '', context: { problemId: 'p', target: 'bug:a' } }],
    });
    const ids = g!.choiceKey!.split(',');
    expect(new Set(ids).size).toBe(5);
    expect(g!.contextKey).toBe('p#bug:a');
    const suite = parseSuite(g!.text);
    expect(suite).toHaveLength(5);
    expect(suite.every((t) => t.style === 'call' && !('expected' in t))).toBe(true);
    await expect(
      policy.generate({ role: 'test', version: 0, seed: 1, n: 1, prompts: [{ key: 'k', prompt: '', context: { problemId: 'p', target: 'nope' } }] }),
    ).rejects.toThrow(PolicyInputError);
  });

  it('applies theta += lr * sum A (onehot - pi) once per batch id and bumps the version', async () => {
    const policy = new CatalogPolicy('code', handUniverse());
    const before = policy.distribution('p');
    const r1 = await policy.trainStep(step());
    expect(r1.version).toBe(1);
    const logits = policy.toJSON().logits.p!;
    // uniform pi = 1/3: ref += 0.5*(1*(2/3) - 1*(-1/3)) = 0.5; bug:a -= 0.5; bug:b unchanged
    expect(logits.ref).toBeCloseTo(0.5, 12);
    expect(logits['bug:a']).toBeCloseTo(-0.5, 12);
    expect(logits['bug:b']).toBeCloseTo(0, 12);
    expect(policy.distribution('p').get('ref')!).toBeGreaterThan(before.get('ref')!);
    const hash = policy.paramsHash();
    expect(await policy.trainStep(step())).toEqual(r1);
    expect(policy.paramsHash()).toBe(hash);
    await expect(policy.trainStep(step({ hyper: { lr: 0.9 } }))).rejects.toThrow(/different content/);
  });

  it('refuses a stale batch with a typed error and applies nothing on a bad sample', async () => {
    const policy = new CatalogPolicy('code', handUniverse());
    await policy.trainStep(step());
    const hash = policy.paramsHash();
    await expect(policy.trainStep(step({ batchId: 'b2', expectedVersion: 0 }))).rejects.toBeInstanceOf(VersionError);
    const bad = step({ batchId: 'b3', expectedVersion: 1 });
    bad.samples.push({ prompt: '', response: '', advantage: 1, contextKey: 'p', choiceKey: 'mut:99' });
    await expect(policy.trainStep(bad)).rejects.toThrow(/mut:99 is not a choice of p/);
    await expect(policy.trainStep(step({ batchId: 'b4', expectedVersion: 1, hyper: {} }))).rejects.toThrow(/hyper.lr/);
    expect(policy.paramsHash()).toBe(hash);
    expect(policy.version).toBe(1);
  });

  it('round-trips through JSON with the same hash and the same samples; serves recent versions', async () => {
    const u = handUniverse();
    const policy = new CatalogPolicy('code', u);
    await policy.trainStep(step());
    const copy = CatalogPolicy.fromJSON(JSON.parse(JSON.stringify(policy.toJSON())), u);
    expect(await copy.snapshot()).toEqual(await policy.snapshot());
    const req = { role: 'code' as const, version: 1, seed: 5, n: 8, prompts: [{ key: 'k', prompt: '', context: { problemId: 'p' } }] };
    expect(await copy.generate(req)).toEqual(await policy.generate(req));
    expect((await policy.generate({ ...req, version: 0 }))[0]!.logprob).toBeCloseTo(Math.log(1 / 3), 12);
    await expect(copy.generate({ ...req, version: 0 })).rejects.toBeInstanceOf(VersionError);
    expect(() => CatalogPolicy.fromJSON({ role: 'code', version: -1 }, u)).toThrow(/not a catalog policy state/);
  });
});

describe('candidate tests', () => {
  it('are deterministic, deduplicated, start with the examples and include out-of-constraint inputs', () => {
    const a = buildTestCatalog(catalogSource(rangeSum), { count: 40, seed: 3 });
    expect(buildTestCatalog(catalogSource(rangeSum), { count: 40, seed: 3 })).toEqual(a);
    expect(a.length).toBe(40);
    expect(new Set(a.map((t) => t.testId)).size).toBe(40);
    expect(a.slice(0, 2).map((t) => t.origin)).toEqual(['example', 'example']);
    expect(a.every((t) => t.test.style === 'stdio' && t.test.output === null)).toBe(true);
    const inputs = buildTestCatalog(catalogSource(rangeSum), { count: 500 }).map((t) => (t.test.style === 'stdio' ? t.test.input : ''));
    expect(inputs).toContain('1000000001 6\n');
    const lists = buildTestCatalog(catalogSource(pairs), { count: 500 }).map((t) => (t.test.style === 'call' ? t.test.args[0] : null));
    expect(lists).toContainEqual([]);
    expect(lists.some((l) => Array.isArray(l) && l.length === 201)).toBe(true);
  });
});

describe('held-out tests stay out of everything that trains or rewards', () => {
  it('no candidate test of any demo problem equals one of its held-out inputs', () => {
    for (const d of demo) {
      const heldOut = new Set(d.problem.tests.private.map(testKey));
      const pool = buildTestCatalog(catalogSource(d), { count: 500, seed: 7 });
      const leaked = pool.filter((t) => heldOut.has(testKey(t.test)));
      expect(
        leaked.map((t) => t.origin),
        d.problem.id,
      ).toEqual([]);
    }
  });

  it('the catalog builders are not given held-out tests, only their inputs as keys to avoid', () => {
    for (const d of demo) {
      const source = catalogSource(d);
      expect(Object.keys(source.problem)).not.toContain('tests');
      expect(source.examples).toEqual(d.problem.tests.public);
      expect(source.avoid.size).toBe(new Set(d.problem.tests.private.map(testKey)).size);
    }
  });
});

describe('candidate programs', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await createSandbox({ warn: () => {} });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('hold the hand-written programs and deterministic, non-equivalent mutants of the reference', async () => {
    const a = await buildProgramCatalog(catalogSource(pairs), sandbox, { maxMutants: 5 });
    const b = await buildProgramCatalog(catalogSource(pairs), sandbox, { maxMutants: 5 });
    expect(a).toEqual(b);
    expect(a.map((c) => c.candidateId).slice(0, 3)).toEqual(['ref', 'var1', 'bug:self-pairs']);
    const mutants = a.filter((c) => c.kind === 'mutant');
    expect(mutants.map((m) => m.candidateId)).toEqual(['mut:1', 'mut:2', 'mut:3', 'mut:4', 'mut:5']);
    expect(new Set(a.map((c) => c.program)).size).toBe(a.length);
    expect(mutants.every((m) => !m.correct)).toBe(true);
    expect(a.filter((c) => c.correct).length).toBe(2);
  });
});
