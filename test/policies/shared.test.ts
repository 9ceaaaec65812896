/**
 * One catalog policy for both roles: a step of either role moves one version, both roles sample
 * the version they name or fail, a retried batch applies nothing twice, and the state survives
 * its JSON (the checkpoint).
 */
import { describe, expect, it } from 'vitest';
import { loadDemo } from '../../src/datasets/demo/index.js';
import { buildTestCatalog, catalogSource, type CatalogUniverse, type ProgramCandidate } from '../../src/datasets/demo/catalog/index.js';
import { CatalogPolicy, SharedCatalogPolicy } from '../../src/policies/catalog/index.js';
import { PolicyInputError, VersionError, type TrainStepRequest } from '../../src/policies/port.js';

const pairs = loadDemo().find((d) => d.problem.id === 'demo/count-pairs-sum')!;

function universe(): CatalogUniverse {
  const programs: ProgramCandidate[] = [
    { candidateId: 'ref', program: 'print(1)', kind: 'reference', correct: true },
    { candidateId: 'bug:a', program: 'print(2)', kind: 'bug', correct: false },
  ];
  return { programs: { p: programs }, tests: { p: buildTestCatalog(catalogSource(pairs), { count: 6 }) }, validTests: { p: [] } };
}

const u = universe();
const testIds = u.tests.p!.map((t) => t.testId);
const codeStep = (expectedVersion: number, batchId = 'code-1'): TrainStepRequest => ({
  batchId,
  role: 'code',
  expectedVersion,
  algorithm: 'grpo',
  hyper: { lr: 1 },
  samples: [{ prompt: '', response: '', advantage: 1, contextKey: 'p', choiceKey: 'ref' }],
});
const testStep = (expectedVersion: number): TrainStepRequest => ({
  batchId: 'test-1',
  role: 'test',
  expectedVersion,
  algorithm: 'grpo',
  hyper: { lr: 1 },
  samples: [{ prompt: '', response: '', advantage: 1, contextKey: 'p', choiceKey: testIds.slice(0, 2).join(',') }],
});

describe('SharedCatalogPolicy', () => {
  it('one version for both roles: the code step makes 1, the test step 2', async () => {
    const shared = new SharedCatalogPolicy(u, { suiteSize: 2 });
    expect((await shared.trainStep(codeStep(0))).version).toBe(1);
    // The test step names the shared version, not a per-role one.
    await expect(shared.trainStep(testStep(0))).rejects.toBeInstanceOf(VersionError);
    expect((await shared.trainStep(testStep(1))).version).toBe(2);
    expect(shared.version).toBe(2);
    // Each role's softmax moved only by its own step, as two separate policies would have.
    const alone = new CatalogPolicy('code', u);
    await alone.trainStep(codeStep(0));
    expect([...shared.role('code').distribution('p').values()]).toEqual([...alone.distribution('p').values()]);
  });

  it('both roles sample the shared version, and only it', async () => {
    const shared = new SharedCatalogPolicy(u, { suiteSize: 2 });
    await shared.trainStep(codeStep(0));
    const prompt = { key: 'k', prompt: '', context: { problemId: 'p' } };
    const code = await shared.generate({ role: 'code', version: 1, seed: 3, n: 2, prompts: [prompt] });
    const test = await shared.generate({ role: 'test', version: 1, seed: 3, n: 2, prompts: [prompt] });
    expect([code.length, test.length]).toEqual([2, 2]);
    await expect(shared.generate({ role: 'test', version: 0, seed: 3, n: 1, prompts: [prompt] })).rejects.toBeInstanceOf(VersionError);
  });

  it('a retried batch returns its first result and applies nothing again; the JSON round-trips', async () => {
    const shared = new SharedCatalogPolicy(u);
    const first = await shared.trainStep(codeStep(0));
    expect(await shared.trainStep(codeStep(0))).toEqual(first);
    expect(shared.version).toBe(1);
    const back = SharedCatalogPolicy.fromJSON(JSON.parse(JSON.stringify(shared.toJSON())), u);
    expect(await back.snapshot()).toEqual(await shared.snapshot());
    expect(() => SharedCatalogPolicy.fromJSON(new CatalogPolicy('code', u).toJSON(), u)).toThrow(PolicyInputError);
  });
});
