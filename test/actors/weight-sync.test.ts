/**
 * Weight sync after publish, against servers that cannot run here (vLLM, SGLang): a whole run
 * trained by a real gpu-bridge process (toy model, CPU) whose policies are sampled from
 * StandInOpenAIServer, a stand-in that also answers vLLM's POST /v1/load_lora_adapter and
 * SGLang's POST /update_weights_from_disk and records every call. Each published version is
 * synced with the server's own request, recorded as WeightsSynced beside its
 * PolicyVersionPublished; under vLLM each version's samples ask for that version's adapter.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig } from '../support/small-config.js';
import { StandInOpenAIServer } from '../support/stand-in-openai-server.js';
import { torchMissing } from '../support/bridge-serve.js';
import { runExperiment } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import { parseConfig } from '../../src/config/load.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { syncWeights } from '../../src/policies/weight-sync.js';
import { PolicyInputError } from '../../src/policies/port.js';
import { catalogCache } from '../support/catalog-cache.js';

const missing = torchMissing();
const KEY_ENV = 'CRUCIBLE_TEST_SYNC_API_KEY';
let root: string;
const servers: StandInOpenAIServer[] = [];

interface Ran {
  server: StandInOpenAIServer;
  events: EventEnvelope[];
  blobs: Map<string, string>;
  finished: boolean;
}

/** One small run (1 problem, 2 rounds) trained through the bridge, synced by `weightSync`. */
async function runWith(name: string, weightSync: Record<string, unknown>): Promise<Ran> {
  const problems = loadDemoProblems();
  const server = await StandInOpenAIServer.start(({ prompt, n }) => {
    const p = problems.find((q) => prompt.includes(q.statement.trim()))!;
    return Array.from({ length: n }, (_, i) =>
      prompt.startsWith('Solve') ? `\`\`\`python\n${i % 2 ? p.solutions[0] : p.incorrectSolutions[0]}\`\`\`` : 'no tests',
    );
  });
  servers.push(server);
  const base = smallConfig(root);
  const openai = (model: string) => ({
    baseUrl: server.baseUrl,
    model,
    maxTokens: 64,
    concurrency: 1,
    timeoutMs: 30_000,
    retry: { attempts: 2, baseDelayMs: 10 },
  });
  const config = parseConfig({
    ...base,
    name,
    rounds: 2,
    dataset: { format: 'demo', limit: 1 },
    sampling: { problemsPerRound: 1, groupSize: 2, suitesPerProgram: 1, suiteSize: 2, whiteBox: false },
    policies: {
      code: { backend: 'openai', lr: 0.001, mutants: 0, openai: openai('toy-code') },
      test: { backend: 'openai', lr: 0.001, openai: openai('toy-test') },
    },
    learner: { bridge: { backend: 'toy', seed: 0, device: 'cpu', config: { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 1024 }, weightSync } },
  });
  const outcome = await runExperiment({ config, dir: path.join(root, name), cacheDir: catalogCache() });
  const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
  const events: EventEnvelope[] = [];
  const blobs = new Map<string, string>();
  for await (const e of log.read()) {
    events.push(e);
    if (e.type === 'PolicyVersionPublished') {
      const h = (e.data as { checkpoint: string }).checkpoint;
      blobs.set(h, await log.blobs.getText(h));
    }
  }
  await log.close();
  return { server, events, blobs, finished: outcome.finished };
}

const ofType = (r: Ran, t: string) => r.events.filter((e) => e.type === t).map((e) => e.data as Record<string, unknown>);
const checkpointPath = (r: Ran, p: Record<string, unknown>) =>
  (JSON.parse(r.blobs.get(p.checkpoint as string)!) as { checkpoint: { path: string } }).checkpoint.path;

describe.skipIf(missing !== null)(`weight sync after each publish${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  let vllm: Ran;
  let sglang: Ran;

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-weight-sync-'));
    process.env[KEY_ENV] = 'stand-in-key';
    vllm = await runWith('vllm', { kind: 'vllm-lora', apiKeyEnv: KEY_ENV });
    sglang = await runWith('sglang', { kind: 'sglang' });
  }, 300_000);

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    delete process.env[KEY_ENV];
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('vLLM: each version is loaded as its own LoRA adapter, recorded right after its publish', () => {
    expect(vllm.finished).toBe(true);
    const published = ofType(vllm, 'PolicyVersionPublished');
    const synced = ofType(vllm, 'WeightsSynced');
    expect(published.map((p) => `${(p.policy as { role: string }).role}:${(p.policy as { version: number }).version}`)).toEqual([
      'code:0',
      'test:0',
      'code:1',
      'test:1',
      'code:2',
      'test:2',
    ]);
    expect(synced.map((s) => s.policy)).toEqual(published.map((p) => p.policy));
    // Each WeightsSynced follows its PolicyVersionPublished in the log.
    const types = vllm.events.map((e) => e.type).filter((t) => t === 'PolicyVersionPublished' || t === 'WeightsSynced');
    expect(types).toEqual(published.flatMap(() => ['PolicyVersionPublished', 'WeightsSynced']));
    published.forEach((p, i) => {
      const { role, version } = p.policy as { role: string; version: number };
      expect(synced[i]).toMatchObject({
        kind: 'vllm-lora',
        url: `${vllm.server.baseUrl}/load_lora_adapter`,
        request: { lora_name: `toy-${role}-v${version}`, lora_path: checkpointPath(vllm, p) },
        status: 200,
        servedModel: `toy-${role}-v${version}`,
      });
    });
  });

  it("vLLM: the server got exactly the recorded calls, with the API key, and every sample asked for its version's adapter", () => {
    const calls = vllm.server.requests.filter((r) => r.path === '/v1/load_lora_adapter');
    const recorded = ofType(vllm, 'WeightsSynced').map((s) => s.request as { lora_name: string });
    // Every recorded sync reached the server, and nothing else was loaded: a sampler loads its
    // version again before its first sample (answered "already loaded", as a restarted run needs).
    expect(vllm.server.adapters).toEqual(recorded.map((r) => r.lora_name));
    for (const c of calls) expect(recorded).toContainEqual(c.body);
    const sampled = ofType(vllm, 'ModelSampled') as { policy: { role: string; version: number }; params: { model: string } }[];
    expect(sampled.length).toBeGreaterThan(0);
    for (const s of sampled) expect(s.params.model).toBe(`toy-${s.policy.role}-v${s.policy.version}`);
    const asked = vllm.server.requests.filter((r) => r.path === '/v1/completions').map((r) => r.body.model);
    expect(new Set(asked)).toEqual(new Set(['toy-code-v0', 'toy-code-v1', 'toy-test-v0', 'toy-test-v1']));
  });

  it('SGLang: each version is loaded by update_weights_from_disk with its checkpoint path; the model name stays', () => {
    expect(sglang.finished).toBe(true);
    const published = ofType(sglang, 'PolicyVersionPublished');
    const synced = ofType(sglang, 'WeightsSynced');
    expect(synced.map((s) => s.policy)).toEqual(published.map((p) => p.policy));
    published.forEach((p, i) => {
      expect(synced[i]).toMatchObject({
        kind: 'sglang',
        url: `${sglang.server.baseUrl.replace(/\/v1$/, '')}/update_weights_from_disk`,
        request: { model_path: checkpointPath(sglang, p) },
        status: 200,
        servedModel: `toy-${(p.policy as { role: string }).role}`,
      });
    });
    const calls = sglang.server.requests.filter((r) => r.path === '/update_weights_from_disk').map((r) => r.body);
    // After publish (recorded) and before a version's first sample (not recorded: the sampler
    // loads what it samples, which a restarted run needs): each recorded call reached the server.
    for (const s of synced) expect(calls).toContainEqual(s.request);
    for (const s of ofType(sglang, 'ModelSampled') as { policy: { role: string }; params: { model: string } }[])
      expect(s.params.model).toBe(`toy-${s.policy.role}`);
  });
});

describe('a refused weight sync', () => {
  it('is an error naming the server, the checkpoint and the answer', async () => {
    const server = await StandInOpenAIServer.start(() => []);
    try {
      server.faults = ['http-500'];
      // The stand-in answers /admin/load_version with its next fault: an HTTP 500.
      await expect(
        syncWeights(
          { kind: 'bridge', serverUrl: server.baseUrl.replace(/\/v1$/, ''), token: null, baseModel: 'm', prefix: 'm' },
          { path: '/ckpt/v000001', sha256: 'ab' },
          1,
        ),
      ).rejects.toThrow(PolicyInputError);
      await expect(
        syncWeights({ kind: 'sglang', serverUrl: 'http://127.0.0.1:1', token: null, baseModel: 'm', prefix: 'm' }, { path: '/ckpt/v000001', sha256: 'ab' }, 1),
      ).rejects.toThrow(/127\.0\.0\.1:1\/update_weights_from_disk: weight sync of \/ckpt\/v000001 \(version 1\) could not reach the server/);
    } finally {
      await server.close();
    }
  });
});
