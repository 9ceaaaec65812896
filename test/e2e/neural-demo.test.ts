/**
 * configs/neural-demo.yaml end to end, cut to a tiny size (one problem, two rounds, two SFT
 * steps, a smaller toy model): the run starts its own gpu-bridge servers, warms both policies up
 * by SFT (recorded as round-0 training events on the problems' known programs and public tests,
 * in the prompts the policies sample with, and the trainer's checkpoint), publishes the warm
 * version and syncs it into the servers, then trains by GRPO each round. The figures of the full
 * demo are in docs/models.md; recording, resuming and caching the warm start are tested in
 * test/actors/warm-start-*.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { torchMissing } from '../support/bridge-serve.js';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import { catalogCache } from '../support/catalog-cache.js';

const missing = torchMissing();
let root: string;
let outcome: RunOutcome;
let events: EventEnvelope[];
const blobs = new Map<string, string>();
const paramsBlobs = new Map<string, string>();

describe.skipIf(missing !== null)(`the neural demo, tiny${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-neural-demo-'));
    const raw = YAML.parse(readFileSync(path.join(import.meta.dirname, '..', '..', 'configs', 'neural-demo.yaml'), 'utf8')) as Record<string, any>;
    // Relative, as `crucible run` from the repository root writes `runs/<id>`: the checkpoints
    // must still be found by the servers, which run in gpu-bridge/.
    raw.dir = path.relative(process.cwd(), root);
    raw.rounds = 2;
    raw.dataset = { format: 'demo', ids: ['demo/digital-root'] };
    raw.sampling = { ...raw.sampling, problemsPerRound: 1, groupSize: 2, suiteSize: 2 };
    raw.learner.sft = { ...raw.learner.sft, steps: 2, batchSize: 4 };
    raw.learner.bridge.config = { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 512 };
    for (const role of ['code', 'test']) raw.policies[role].openai.maxTokens = 24;
    const config = parseConfig(raw);
    outcome = await runExperiment({ config, cacheDir: catalogCache() });
    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    events = [];
    for await (const e of log.read()) {
      events.push(e);
      const h = (e.data as { batchHash?: string }).batchHash;
      if (h) blobs.set(h, await log.blobs.getText(h));
      const p = (e.data as { paramsHash?: string }).paramsHash;
      if (e.type === 'PolicyVersionPublished' && p) paramsBlobs.set(p, await log.blobs.getText(p));
    }
    await log.close();
  }, 300_000);

  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const ofType = (t: string) => events.filter((e) => e.type === t).map((e) => e.data as Record<string, any>);

  it('finishes both rounds', () => {
    expect(outcome.finished).toBe(true);
    expect(outcome.rows.map((r) => r.round)).toEqual([1, 2]);
  });

  it('SFT before round 1: two recorded steps per role on the known programs and public tests, a checkpoint, then the warm version is published and synced', () => {
    const firstRound = events.findIndex((e) => e.type === 'RoundStarted');
    const before = events.slice(0, firstRound);
    const steps = before.filter((e) => e.type === 'TrainingStepCompleted').map((e) => e.data as Record<string, any>);
    expect(steps.map((s) => `${s.round}:${s.role}:${s.fromVersion}->${s.toVersion}`)).toEqual(['0:code:0->1', '0:code:1->2', '0:test:0->1', '0:test:1->2']);
    // Each role's steps end with the trainer's checkpoint (one chunk: fewer steps than
    // learner.sft.record.steps); then the warm versions are published and synced, nothing before.
    const checkpoints = before.filter((e) => e.type === 'WarmStartCheckpointed').map((e) => e.data as Record<string, any>);
    expect(checkpoints.map((c) => `${c.role}:${c.step}/${c.steps}:v${c.policy.version}:${c.cached}`)).toEqual(['code:2/2:v2:false', 'test:2/2:v2:false']);
    const published = before.filter((e) => e.type === 'PolicyVersionPublished').map((e) => e.data as Record<string, any>);
    expect(published.map((p) => `${p.policy.role}:${p.policy.version}`)).toEqual(['code:2', 'test:2']);
    expect(published.map((p) => p.paramsHash)).toEqual(checkpoints.map((c) => c.checkpoint));
    expect(before.filter((e) => e.type === 'WeightsSynced')).toHaveLength(2);
    const problem = loadDemoProblems().find((p) => p.id === 'demo/digital-root')!;
    const batches = before.filter((e) => e.type === 'TrainingBatchFormed').map((e) => e.data as Record<string, any>);
    expect(batches.map((b) => b.batchId)).toEqual([
      `${outcome.runId}/sft/1/code`,
      `${outcome.runId}/sft/2/code`,
      `${outcome.runId}/sft/1/test`,
      `${outcome.runId}/sft/2/test`,
    ]);
    const code = blobs
      .get(batches[0]!.batchHash)!
      .split('\n')
      .map((l) => JSON.parse(l) as { prompt: string; response: string });
    // The brief prompt the code policy samples with; the known programs, correct and not.
    for (const row of code)
      expect(row.prompt).toBe(
        'Python 3 program; defines `digital_root`.\nReplace n by the sum of its decimal digits until a single digit remains; return that digit.\n',
      );
    expect(code).toHaveLength(4);
    for (const row of code) expect([...problem.solutions, ...problem.incorrectSolutions]).toContain(row.response);
    // White-box: the test rows show a known program; their suites are orderings of the examples.
    const tests = blobs
      .get(batches[2]!.batchHash)!
      .split('\n')
      .map((l) => JSON.parse(l) as { prompt: string; response: string });
    const [a, b] = ['assert digital_root(38) == 2', 'assert digital_root(7) == 7'];
    const suites = [[a, b], [b, a], [a], [b]].map((lines) => ['```python', ...lines, '```'].join('\n'));
    for (const row of tests) {
      expect(suites).toContain(row.response);
      expect([...problem.solutions, ...problem.incorrectSolutions].some((p) => row.prompt.includes(p.trimEnd()))).toBe(true);
    }
  });

  it('then GRPO: one step per role and round, sampled from the warm version', () => {
    const grpo = ofType('TrainingStepCompleted').filter((s) => s.round > 0);
    expect(grpo.map((s) => `${s.round}:${s.role}:${s.fromVersion}->${s.toVersion}`)).toEqual(['1:code:2->3', '1:test:2->3', '2:code:3->4', '2:test:3->4']);
    const sampled = ofType('ModelSampled') as { policy: { role: string; version: number }; served: { fingerprint: string } }[];
    expect(new Set(sampled.filter((s) => s.policy.role === 'code').map((s) => s.policy.version))).toEqual(new Set([2, 3]));
    for (const s of sampled) expect(s.served.fingerprint).toBe(`v${s.policy.version}`);
  });

  it('each test-policy GRPO step trains a TOPVAR group with spread and moves the weights', () => {
    const weights = new Map<number, string>();
    for (const e of ofType('PolicyVersionPublished').filter((p) => p.policy.role === 'test')) {
      const params = JSON.parse(paramsBlobs.get(e.paramsHash)!) as { checkpoint: { path: string } | null };
      const manifest = JSON.parse(readFileSync(path.join(params.checkpoint!.path, 'MANIFEST.json'), 'utf8')) as { files: Record<string, { sha256: string }> };
      expect(Object.keys(manifest.files)).toContain('optimizer.pt');
      weights.set(e.policy.version, manifest.files['model.pt']!.sha256);
    }
    const steps = ofType('TrainingStepCompleted').filter((s) => s.round > 0 && s.role === 'test');
    expect(steps).toHaveLength(2);
    for (const s of steps) {
      expect(s.metrics.placeholder).toBe(0);
      expect(s.metrics.grad_norm).toBeGreaterThan(1e-3);
      expect(weights.get(s.toVersion)).not.toBe(weights.get(s.fromVersion));
    }
    // TOPVAR: one program's two suites per problem and round.
    const trained = ofType('TrainingBatchFormed').filter((b) => b.round > 0 && b.role === 'test');
    expect(trained.map((b) => b.size)).toEqual([2, 2]);
    for (const b of trained) {
      const rows = blobs
        .get(b.batchHash)!
        .split('\n')
        .map((l) => JSON.parse(l) as { prompt: string; advantage: number });
      // White-box: both suites were sampled from one prompt showing their program.
      expect(new Set(rows.map((r) => r.prompt)).size).toBe(1);
      expect(rows[0]!.prompt).toMatch(/^Tests \(assert lines\) for this Python 3 program; defines `digital_root`\.\n[^]*```python\n[^]*\n```\n$/);
      expect(rows.some((r) => r.advantage !== 0)).toBe(true);
    }
  });
});
