/**
 * The real-model loop on CPU: two gpu-bridge `serve` processes (code and test policies, toy
 * model) sampled through the openai backend, trained by a gpu-bridge process (GRPO steps on JSONL
 * batches by reference), each version published as a checkpoint and loaded into its server
 * before the next round samples. The toy model's answers are noise; the path is what is tested.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servedRunConfig } from '../support/small-config.js';
import { startBridgeServe, torchMissing, type BridgeServe } from '../support/bridge-serve.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { ServedBackend } from '../../src/actors/served-backend.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import type { RunConfig } from '../../src/config/schema.js';
import { catalogCache } from '../support/catalog-cache.js';

const missing = torchMissing();
const TOKEN_ENV = 'CRUCIBLE_TEST_SERVE_ADMIN_TOKEN';
const token = 'serve-admin-token-for-tests';
let root: string;
const servers: BridgeServe[] = [];
let outcome: RunOutcome;
let runConfig: RunConfig;
let events: EventEnvelope[];
const blobs = new Map<string, string>();

describe.skipIf(missing !== null)(`a run trained through gpu-bridge and served by gpu-bridge serve${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bridge-train-'));
    process.env[TOKEN_ENV] = token;
    const [code, test] = await Promise.all([startBridgeServe({ seed: 5, adminToken: token }), startBridgeServe({ seed: 6, adminToken: token })]);
    servers.push(code!, test!);
    const config = servedRunConfig(root, { code: code!, test: test! }, { tokenEnv: TOKEN_ENV, maxTokens: 24 });
    runConfig = config;
    outcome = await runExperiment({ config, dir: path.join(root, 'run'), cacheDir: catalogCache() });
    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    events = [];
    for await (const e of log.read()) {
      events.push(e);
      const d = e.data as Record<string, unknown>;
      for (const k of ['promptHash', 'batchHash', 'checkpoint', 'tokensHash'])
        if (typeof d[k] === 'string') blobs.set(d[k] as string, await log.blobs.getText(d[k] as string));
    }
    await log.close();
  }, 600_000);

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    delete process.env[TOKEN_ENV];
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const data = (t: string) => events.filter((e) => e.type === t).map((e) => e.data as Record<string, unknown>);

  it('completes both rounds with one applied step per role and round, versions 0 -> 1 -> 2', () => {
    expect(outcome.finished).toBe(true);
    const steps = data('TrainingStepCompleted') as { role: string; fromVersion: number; toVersion: number; metrics: Record<string, number> }[];
    expect(steps.map((s) => `${s.role}:${s.fromVersion}->${s.toVersion}`)).toEqual(['code:0->1', 'test:0->1', 'code:1->2', 'test:1->2']);
    for (const s of steps) {
      expect(Number.isFinite(s.metrics.loss)).toBe(true);
      expect(s.metrics.rows).toBeGreaterThan(0);
      expect(s.metrics.duplicate).toBe(0);
    }
    expect(data('TrainingStepFailed')).toEqual([]);
  });

  it('names each version by its published checkpoint: a stable directory whose manifest hash is recorded', () => {
    const published = data('PolicyVersionPublished') as { policy: { role: string; version: number }; checkpoint: string }[];
    expect(published.map((p) => `${p.policy.role}:${p.policy.version}`)).toEqual(['code:0', 'test:0', 'code:1', 'test:1', 'code:2', 'test:2']);
    for (const p of published) {
      const params = JSON.parse(blobs.get(p.checkpoint)!) as { version: number; checkpoint: { path: string; sha256: string } };
      expect(params.version).toBe(p.policy.version);
      expect(params.checkpoint.path).toBe(path.join(outcome.dir, 'checkpoints', p.policy.role, `v${String(p.policy.version).padStart(6, '0')}`));
      expect(readFileSync(path.join(params.checkpoint.path, 'STABLE'), 'utf8').trim()).toBe(params.checkpoint.sha256);
    }
  });

  it('every sample comes from the version it names: the server was reloaded after each publish', () => {
    const sampled = data('ModelSampled') as { policy: { version: number }; served: { fingerprint: string } }[];
    expect(sampled.length).toBe(2 * (2 * 2 + 2 * 2));
    for (const s of sampled) expect(s.served.fingerprint).toBe(`v${s.policy.version}`);
    expect(new Set(sampled.map((s) => s.policy.version))).toEqual(new Set([0, 1]));
  });

  it('trains each sample on the exact prompt it was sampled from', () => {
    const prompts = new Map((data('ModelSampled') as { sampleId: string; promptHash: string }[]).map((s) => [s.sampleId, blobs.get(s.promptHash)!]));
    for (const b of data('TrainingBatchFormed') as { batchHash: string; sampleIds: string[] }[]) {
      const rows = blobs
        .get(b.batchHash)!
        .split('\n')
        .map((l) => JSON.parse(l) as { prompt: string });
      expect(rows.map((r) => r.prompt)).toEqual(b.sampleIds.map((id) => prompts.get(id)));
    }
  });

  it('trains GRPO on the tokens as sampled, with their sampling log-probs as the old log-probs (ratio 1 on-policy)', () => {
    const tokens = new Map(
      (data('ModelSampled') as { sampleId: string; tokensHash: string }[]).map((s) => [
        s.sampleId,
        JSON.parse(blobs.get(s.tokensHash)!) as { tokenIds: number[]; tokenLogprobs: number[] },
      ]),
    );
    for (const b of data('TrainingBatchFormed') as { batchHash: string; sampleIds: string[] }[]) {
      const samples = blobs
        .get(b.batchHash)!
        .split('\n')
        .map((l) => JSON.parse(l) as { sampled?: { tokenIds: number[]; logprobs: number[] } });
      samples.forEach((s, i) =>
        expect(s.sampled).toEqual({ tokenIds: tokens.get(b.sampleIds[i]!)!.tokenIds, logprobs: tokens.get(b.sampleIds[i]!)!.tokenLogprobs }),
      );
    }
    for (const s of data('TrainingStepCompleted') as { metrics: Record<string, number> }[]) {
      expect(s.metrics.oldLogprobRows).toBe(s.metrics.rows);
      // Sampled at the version trained: the new/old ratio is 1 up to float error (KV-cache
      // decoding against one full forward pass).
      expect(Math.abs(s.metrics.ratio_mean! - 1)).toBeLessThan(1e-3);
    }
  });

  it('a server started again with other weights is loaded with the named version before it samples', async () => {
    const fresh = await startBridgeServe({ seed: 9, adminToken: token });
    servers.push(fresh);
    const openai = { ...runConfig.policies.code.openai!, baseUrl: fresh.baseUrl };
    const backend = new ServedBackend(
      { ...runConfig, policies: { ...runConfig.policies, code: { ...runConfig.policies.code, openai } } },
      loadDemoProblems(),
      outcome.dir,
    );
    const last = (data('PolicyVersionPublished') as { policy: { role: string; version: number }; checkpoint: string }[])
      .filter((p) => p.policy.role === 'code')
      .at(-1)!;
    const policy = backend.sampler('code', blobs.get(last.checkpoint)!, last.policy.version);
    const problem = loadDemoProblems()[0]!;
    const [g] = await policy.generate({
      role: 'code',
      version: last.policy.version,
      seed: 1,
      n: 1,
      prompts: [{ key: problem.id, prompt: problem.statement, context: { problemId: problem.id } }],
    });
    expect(g!.record!.served.fingerprint).toBe(`v${last.policy.version}`);
    await backend.close();
  }, 120_000);

  it("a sampler on a disk without the run's checkpoints loads its version from the log's blob store", async () => {
    const published = (data('PolicyVersionPublished') as { policy: { role: string; version: number }; checkpoint: string }[])
      .filter((p) => p.policy.role === 'code')
      .at(-1)!;
    const params = JSON.parse(blobs.get(published.checkpoint)!) as {
      checkpoint: { path: string; sha256: string; files: Record<string, { sha256: string; bytes: number }> };
    };
    expect(Object.keys(params.checkpoint.files).sort()).toEqual(['config.json', 'model.pt', 'optimizer.pt']);
    // The trainer's disk is not this one: its checkpoint directories are gone.
    rmSync(path.join(outcome.dir, 'checkpoints'), { recursive: true, force: true });
    const fresh = await startBridgeServe({ seed: 11, adminToken: token });
    servers.push(fresh);
    const elsewhere = path.join(root, 'other-machine');
    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    try {
      const openai = { ...runConfig.policies.code.openai!, baseUrl: fresh.baseUrl };
      const backend = new ServedBackend(
        { ...runConfig, policies: { ...runConfig.policies, code: { ...runConfig.policies.code, openai } } },
        loadDemoProblems(),
        elsewhere,
        undefined,
        log.blobs,
      );
      const policy = backend.sampler('code', blobs.get(published.checkpoint)!, published.policy.version);
      const problem = loadDemoProblems()[0]!;
      const [g] = await policy.generate({
        role: 'code',
        version: published.policy.version,
        seed: 1,
        n: 1,
        prompts: [{ key: problem.id, prompt: problem.statement, context: { problemId: problem.id } }],
      });
      expect(g!.record!.served.fingerprint).toBe(`v${published.policy.version}`);
      expect(readFileSync(path.join(elsewhere, 'checkpoint-cache', params.checkpoint.sha256, 'STABLE'), 'utf8').trim()).toBe(params.checkpoint.sha256);
      await backend.close();
    } finally {
      await log.close();
    }
  }, 120_000);
});
