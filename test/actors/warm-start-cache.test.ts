/**
 * The warm start computed once: configs/neural-demo.yaml cut to a tiny size (one problem, one
 * round, a smaller toy model, both served by the run's own gpu-bridge servers) runs, then its
 * frozen control in the same folder. The trained run trains the SFT steps and keeps the last
 * checkpoint of each role in the folder's warm-start cache; the control asks for the same warm
 * start (same model, rows, steps, batch size, lr and seed), takes the cache's entry without a
 * single SFT step, records that it did and under which key, and samples round 1 from the same
 * weights: the same round-1 samples and figures.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { torchMissing } from '../support/bridge-serve.js';
import { catalogCache } from '../support/catalog-cache.js';
import { recordedEvents } from '../support/run-log.js';
import { runCli } from '../support/cli.js';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import type { LearnerTrainer, PolicyBackend } from '../../src/actors/env.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { trainerCodeVersion } from '../../src/bridge/trainer-code.js';
import { canonicalJson } from '../../src/core/canonical-json.js';

const missing = torchMissing();
let root: string;
const runs: Record<'trained' | 'control' | 'otherLr', { outcome: RunOutcome; events: EventEnvelope[]; sftSteps: number; params: Map<string, string> }> =
  {} as never;

/** The run's backend, its trainers counting the SFT steps they are asked for. */
function counting(inner: PolicyBackend, count: () => void): PolicyBackend {
  const wrap = (t: LearnerTrainer): LearnerTrainer => ({
    name: t.name,
    get version() {
      return t.version;
    },
    trainStep: (r) => {
      if (r.algorithm === 'sft') count();
      return t.trainStep(r);
    },
    snapshot: () => t.snapshot(),
    ...(t.checkpoint ? { checkpoint: () => t.checkpoint!() } : {}),
  });
  return {
    name: inner.name,
    exactBasis: inner.exactBasis,
    initialParams: (role) => inner.initialParams(role),
    evaluate: (...a) => inner.evaluate(...a),
    sampler: (...a) => inner.sampler(...a),
    trainer: (...a) => wrap(inner.trainer(...a)),
    ...(inner.warmStartCache ? { warmStartCache: inner.warmStartCache } : {}),
  };
}

async function run(kind: 'trained' | 'control' | 'otherLr') {
  const raw = YAML.parse(
    readFileSync(path.join(import.meta.dirname, '..', '..', 'configs', kind === 'trained' ? 'neural-demo.yaml' : 'neural-demo-frozen.yaml'), 'utf8'),
  );
  raw.dir = root;
  raw.rounds = 1;
  raw.dataset = { format: 'demo', ids: ['demo/digital-root'] };
  raw.sampling = { ...raw.sampling, problemsPerRound: 1, groupSize: 2, suiteSize: 2 };
  // 'otherLr': the trained run with another SFT learning rate, a warm start of its own.
  raw.learner.sft = { ...raw.learner.sft, steps: { code: 5, test: 3 }, batchSize: 4, record: { steps: 2 }, ...(kind === 'otherLr' ? { lr: 0.002 } : {}) };
  raw.learner.bridge.config = { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 512 };
  for (const role of ['code', 'test']) raw.policies[role].openai.maxTokens = 24;
  let sftSteps = 0;
  const outcome = await runExperiment({ config: parseConfig(raw), cacheDir: catalogCache(), testOnlyWrapBackend: (b) => counting(b, () => sftSteps++) });
  const events = await recordedEvents(outcome.dir);
  // Each parameters blob the log names (what a version's checkpoint is).
  const params = new Map<string, string>();
  const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false, readOnly: true });
  for (const e of events) {
    const h = (e.data as { checkpoint?: string }).checkpoint;
    if ((e.type === 'WarmStartCheckpointed' || e.type === 'PolicyVersionPublished') && h) params.set(h, await log.blobs.getText(h));
  }
  await log.close();
  runs[kind] = { outcome, events, sftSteps, params };
}

describe.skipIf(missing !== null)(`a warm start computed once for a run and its control${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-warm-cache-'));
    await run('trained');
    await run('control');
    await run('otherLr');
  }, 360_000);

  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const ofType = (kind: 'trained' | 'control' | 'otherLr', t: string) =>
    runs[kind].events.filter((e) => e.type === t).map((e) => e.data as Record<string, any>);
  const checkpointOf = (kind: 'trained' | 'control', paramsHash: string) =>
    (JSON.parse(runs[kind].params.get(paramsHash)!) as { checkpoint: { sha256: string } }).checkpoint.sha256;

  it('the trained run trains every SFT step, recorded in chunks of two with a checkpoint each, and keeps the last in the cache', () => {
    const t = runs.trained;
    expect(t.outcome.finished).toBe(true);
    expect(t.sftSteps).toBe(8);
    const recorded = ofType('trained', 'WarmStartCheckpointed');
    expect(recorded.map((c) => `${c.role}:${c.step}/${c.steps}:${c.cached}`)).toEqual([
      'code:2/5:false',
      'code:4/5:false',
      'code:5/5:false',
      'test:2/3:false',
      'test:3/3:false',
    ]);
    // Every step's loss, each step once.
    const steps = ofType('trained', 'TrainingStepCompleted').filter((s) => s.round === 0);
    expect(steps.map((s) => `${s.role}:${s.fromVersion}->${s.toVersion}`)).toEqual([
      ...[0, 1, 2, 3, 4].map((v) => `code:${v}->${v + 1}`),
      ...[0, 1, 2].map((v) => `test:${v}->${v + 1}`),
    ]);
    for (const s of steps) expect(Number.isFinite(s.metrics.loss)).toBe(true);
    for (const c of recorded.filter((r) => r.step === r.steps)) {
      const dir = path.join(root, '.cache', 'warm-start', c.key);
      expect(existsSync(path.join(dir, 'MANIFEST.json'))).toBe(true);
      expect(readFileSync(path.join(dir, 'STABLE'), 'utf8').trim()).toBe(checkpointOf('trained', c.checkpoint));
      // What the key stands for: the rows, the step settings and the trainer (model, options,
      // code); the key is the sha256 of those parts.
      const about = JSON.parse(readFileSync(`${dir}.json`, 'utf8')) as Record<string, unknown>;
      const { key: _key, sha256: _sha256, computedBy: _by, ...parts } = about;
      expect(createHash('sha256').update(canonicalJson(parts)).digest('hex')).toBe(c.key);
      expect(about).toMatchObject({
        key: c.key,
        role: c.role,
        rows: expect.stringMatching(/^[0-9a-f]{64}$/),
        steps: c.steps,
        batchSize: 4,
        lr: 0.003,
        seed: expect.any(Number),
        trainer: {
          trainer: 'gpu-bridge',
          code: trainerCodeVersion(),
          torch: expect.any(String),
          blas: expect.any(Array),
          options: { backend: 'toy', seed: 0, device: 'cpu', threads: 1 },
        },
        computedBy: t.outcome.runId,
      });
    }
  });

  it('the control takes the cached warm start: no SFT step asked of its trainer, and the log says which entry it started from', () => {
    const c = runs.control;
    expect(c.outcome.finished).toBe(true);
    expect(c.outcome.runId).not.toBe(runs.trained.outcome.runId);
    expect(c.sftSteps).toBe(0);
    expect(ofType('control', 'TrainingBatchFormed').filter((b) => b.round === 0)).toEqual([]);
    const recorded = ofType('control', 'WarmStartCheckpointed');
    const trainedLast = ofType('trained', 'WarmStartCheckpointed').filter((r) => r.step === r.steps);
    expect(recorded.map((r) => `${r.role}:${r.step}/${r.steps}:v${r.policy.version}:${r.cached}`)).toEqual(['code:5/5:v5:true', 'test:3/3:v3:true']);
    expect(recorded.map((r) => r.key)).toEqual(trainedLast.map((r) => r.key));
    // The same checkpoints (by their hash), published as the versions round 1 samples.
    expect(recorded.map((r) => checkpointOf('control', r.checkpoint))).toEqual(trainedLast.map((r) => checkpointOf('trained', r.checkpoint)));
    const published = (kind: 'trained' | 'control') =>
      ofType(kind, 'PolicyVersionPublished')
        .filter((p) => p.round === 0)
        .map((p) => `${p.policy.role}:${p.policy.version}:${checkpointOf(kind, p.paramsHash)}`);
    expect(published('control')).toEqual(published('trained'));
  });

  it('round 1 is sampled from the same weights: the same samples and the same figures', () => {
    const samples = (kind: 'trained' | 'control') => ofType(kind, 'ModelSampled').map((s) => `${s.policy.role}:${s.policy.version}:${s.responseHash}`);
    expect(samples('control')).toHaveLength(samples('trained').length);
    expect(samples('control').length).toBeGreaterThan(0);
    expect(samples('control')).toEqual(samples('trained'));
    const { seconds: _a, ...trained } = runs.trained.outcome.rows[0]!;
    const { seconds: _b, ...control } = runs.control.outcome.rows[0]!;
    expect(control).toEqual(trained);
  });

  it('another SFT setting misses the cache: every step trained again, under another key', () => {
    const o = runs.otherLr;
    expect(o.outcome.finished).toBe(true);
    expect(o.sftSteps).toBe(8);
    const last = ofType('otherLr', 'WarmStartCheckpointed').filter((r) => r.step === r.steps);
    expect(last.map((r) => `${r.role}:${r.cached}`)).toEqual(['code:false', 'test:false']);
    const trainedKeys = ofType('trained', 'WarmStartCheckpointed').map((r) => r.key);
    for (const r of last) expect(trainedKeys).not.toContain(r.key);
    const about = JSON.parse(readFileSync(path.join(root, '.cache', 'warm-start', `${last[0]!.key}.json`), 'utf8')) as { lr: number };
    expect(about.lr).toBe(0.002);
  });

  it("replay --verify rebuilds the control's read models", async () => {
    const { code, out } = await runCli(['replay', runs.control.outcome.dir, '--verify', '--json']);
    expect(code).toBe(0);
    expect((JSON.parse(out) as { verified: boolean }).verified).toBe(true);
  });
});
