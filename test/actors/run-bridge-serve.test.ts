/**
 * A run sampled from a real model server: gpu-bridge's `serve` over the toy model (random
 * weights, so its answers are noise; what is tested is the path, not the model). Every sample
 * is recorded with the token ids and log-probs the server returned, and a recorded sample is
 * drawn again, identically, from its recorded prompt, parameters and seed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig } from '../support/small-config.js';
import { startBridgeServe, torchMissing, type BridgeServe } from '../support/bridge-serve.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { parseConfig } from '../../src/config/load.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { catalogCache } from '../support/catalog-cache.js';

const missing = torchMissing();
let root: string;
let serve: BridgeServe | undefined;
let outcome: RunOutcome;
let events: EventEnvelope[];
const blobs = new Map<string, string>();

describe.skipIf(missing !== null)(`a run sampled from gpu-bridge serve (toy model)${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-serve-run-'));
    serve = await startBridgeServe({ seed: 1 });
    const base = smallConfig(root);
    const openai = {
      baseUrl: serve.baseUrl,
      model: serve.model,
      maxTokens: 24,
      temperature: 1,
      concurrency: 1,
      timeoutMs: 60_000,
      retry: { attempts: 2, baseDelayMs: 50 },
    };
    const config = parseConfig({
      ...base,
      rounds: 1,
      dataset: { format: 'demo', limit: 2 },
      sampling: { problemsPerRound: 2, groupSize: 2, suitesPerProgram: 1, suiteSize: 2, whiteBox: false },
      policies: { code: { backend: 'openai', openai }, test: { backend: 'openai', openai } },
      learner: { control: 'frozen' },
    });
    outcome = await runExperiment({ config, dir: path.join(root, 'run'), cacheDir: catalogCache() });
    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    events = [];
    for await (const e of log.read()) {
      events.push(e);
      if (e.type === 'ModelSampled') {
        const d = e.data as { promptHash: string; responseHash: string; tokensHash: string };
        for (const h of [d.promptHash, d.responseHash, d.tokensHash]) blobs.set(h, await log.blobs.getText(h));
      }
    }
    await log.close();
  }, 600_000);

  afterAll(async () => {
    await serve?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const sampled = () =>
    events
      .filter((e) => e.type === 'ModelSampled')
      .map(
        (e) =>
          e.data as Record<string, unknown> & { promptHash: string; responseHash: string; tokensHash: string; params: Record<string, unknown>; seed: number },
      );

  it('completes, with every solution and suite recorded as a model sample of the served version', () => {
    expect(outcome.finished).toBe(true);
    const ids = events
      .filter((e) => e.type === 'SolutionSampled' || e.type === 'TestsSampled')
      .map((e) => (e.data as { solutionId?: string; suiteId?: string }).solutionId ?? (e.data as { suiteId: string }).suiteId);
    expect(ids).toHaveLength(2 * 2 + 2 * 2);
    expect(
      sampled()
        .map((s) => s.sampleId)
        .sort(),
    ).toEqual([...ids].sort());
    for (const s of sampled()) {
      expect(s.served).toEqual({ model: 'toy-policy', fingerprint: 'v0' });
      // Noise from random weights is still a sample with a recorded reading.
      expect(['ok', 'partial', 'invalid']).toContain((s.parse as { status: string }).status);
    }
  });

  it('records the token ids and one sampling log-prob per token, as the server returned them', () => {
    for (const s of sampled()) {
      const t = JSON.parse(blobs.get(s.tokensHash)!) as { tokenIds: number[]; tokenLogprobs: number[] };
      expect(t.tokenIds.length).toBeGreaterThan(0);
      expect(t.tokenIds.length).toBeLessThanOrEqual(24);
      expect(t.tokenLogprobs).toHaveLength(t.tokenIds.length);
      expect(t.tokenLogprobs.every((x) => Number.isFinite(x) && x <= 0)).toBe(true);
    }
  });

  it('a recorded sample is drawn again from its recorded prompt, parameters and seed', async () => {
    const s = sampled().find((x) => x.role === 'code')!;
    const res = await fetch(`${serve!.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...s.params, prompt: blobs.get(s.promptHash) }),
    });
    const body = (await res.json()) as { choices: { text: string }[] };
    expect(body.choices[s.index as number]!.text).toBe(blobs.get(s.responseHash));
  });
});
