/**
 * The bridge trainer against real gpu-bridge processes (toy model, CPU): a bridge killed in the
 * middle of a step is a recorded failure, a new bridge loads the last published version, and the
 * same batch id is applied exactly once: the published result is bit for bit the one of an
 * uninterrupted step. Batches are JSONL files named by sha256; rows say what they train.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BridgeClient } from '../../src/bridge/index.js';
import { BridgeTrainerOptions } from '../../src/config/openai.js';
import { BridgeTrainer, batchRows } from '../../src/policies/bridge-trainer.js';
import type { TrainStepRequest } from '../../src/policies/port.js';
import { torchMissing } from '../support/bridge-serve.js';

const missing = torchMissing();
let root: string;
const started: BridgeClient[] = [];

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bridge-trainer-'));
});
afterAll(async () => {
  await Promise.all(started.map((c) => c.shutdown(2000)));
  rmSync(root, { recursive: true, force: true });
});

const options = BridgeTrainerOptions.parse({ backend: 'toy', seed: 3, device: 'cpu', microBatchSize: 2, retry: { attempts: 3, baseDelayMs: 10 } });
const fresh = JSON.stringify({ backend: 'bridge', version: 0, checkpoint: null });

function request(): TrainStepRequest {
  const samples = Array.from({ length: 16 }, (_, i) => ({
    prompt: `Solve problem ${i % 4}:\nreturn the sum of a and b.`,
    response: `def add(a, b):\n    return a ${i % 2 ? '-' : '+'} b${' '.repeat(i * 8)}\n`,
    advantage: i % 2 ? -1 : 1,
    contextKey: null,
    choiceKey: null,
  }));
  return { batchId: 'run/round/1/code', role: 'code', expectedVersion: 0, algorithm: 'grpo', samples, hyper: { lr: 0.01 } };
}

/** A client factory that starts a new bridge whenever the last one is gone. */
function bridges(onFirst?: (c: BridgeClient) => void) {
  let current: BridgeClient | null = null;
  let count = 0;
  return async () => {
    if (current?.alive) return current;
    const first = count++ === 0;
    const { client } = await BridgeClient.start({ timeoutMs: 120_000, onEvent: (e) => first && e.event === 'progress' && onFirst?.(client) });
    started.push(client);
    current = client;
    return client;
  };
}

describe('batchRows', () => {
  it('writes grpo, kto and sft rows from samples, and a zero-advantage row for a grpo batch with no text', () => {
    const req = request();
    expect(batchRows(req).rows[1]).toEqual({ prompt: req.samples[1]!.prompt, completion: req.samples[1]!.response, eos: true, advantage: -1 });
    expect(batchRows({ ...req, algorithm: 'kto' }).rows[0]).toMatchObject({ label: true });
    expect(batchRows({ ...req, algorithm: 'sft' }).rows[0]).not.toHaveProperty('advantage');
    const empty = { ...req, samples: req.samples.map((s) => ({ ...s, response: '' })) };
    expect(batchRows(empty)).toEqual({ rows: [{ prompt: ' ', completion: ' ', eos: true, advantage: 0 }], placeholder: true, oldLogprobRows: 0 });
    expect(() => batchRows({ ...empty, algorithm: 'kto' })).toThrow(/no sample with text/);
  });

  it('a sample with its sampled tokens trains them under GRPO with their log-probs as old_logprobs; KTO and SFT train the text', () => {
    const req = request();
    const sampled = { tokenIds: [5, 9, 2], logprobs: [-0.5, -1.25, -0.01] };
    const withTokens = { ...req, samples: req.samples.map((s, i) => (i === 0 ? { ...s, sampled } : s)) };
    const grpo = batchRows(withTokens);
    expect(grpo.rows[0]).toEqual({ prompt: req.samples[0]!.prompt, completion_ids: [5, 9, 2], old_logprobs: [-0.5, -1.25, -0.01], advantage: 1 });
    expect(grpo.rows[1]).toHaveProperty('completion');
    expect(grpo.oldLogprobRows).toBe(1);
    expect(batchRows({ ...withTokens, algorithm: 'kto' }).rows[0]).toMatchObject({ completion: req.samples[0]!.response, label: true });
    expect(batchRows({ ...withTokens, algorithm: 'sft' }).rows[0]).not.toHaveProperty('old_logprobs');
  });
});

describe.skipIf(missing !== null)(`BridgeTrainer over gpu-bridge${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  it('a bridge killed mid-step: failure recorded, same batch id retried on a new bridge, applied once', async () => {
    const reference = new BridgeTrainer(
      { client: bridges(), role: 'code', options, root: path.join(root, 'ref'), batchDir: path.join(root, 'ref-batches'), reload: null },
      fresh,
    );
    await reference.snapshot();
    const ok = await reference.trainStep(request());
    expect(ok.failures).toEqual([]);
    const refSnap = JSON.parse((await reference.snapshot()).params) as { checkpoint: { sha256: string } };

    let killed = 0;
    const trainer = new BridgeTrainer(
      {
        client: bridges((c) => (killed++ === 0 ? c.kill() : undefined)),
        role: 'code',
        options,
        root: path.join(root, 'killed'),
        batchDir: path.join(root, 'killed-batches'),
        reload: null,
      },
      fresh,
    );
    await trainer.snapshot();
    const r = await trainer.trainStep(request());
    expect(killed).toBeGreaterThan(0);
    expect(r.failures).toHaveLength(1);
    expect(r.failures![0]).toMatchObject({ retryable: true, error: expect.stringContaining('gpu-bridge is dead') });
    expect(r.version).toBe(1);
    expect(r.metrics.duplicate).toBe(0);
    expect(r.metrics.loss).toBe(ok.metrics.loss);
    const snap = JSON.parse((await trainer.snapshot()).params) as { version: number; checkpoint: { path: string; sha256: string } };
    expect(snap.version).toBe(1);
    // The same weights as the uninterrupted step: not lost, not applied twice.
    expect(snap.checkpoint.sha256).toBe(refSnap.checkpoint.sha256);
    // The batch went by reference: a JSONL file, one row per sample.
    expect(
      readFileSync(path.join(root, 'killed-batches', 'run_round_1_code.jsonl'), 'utf8')
        .trim()
        .split('\n'),
    ).toHaveLength(16);
  }, 300_000);

  it('old log-probs reach the GRPO ratio: the same sampled tokens, recorded as far likelier than the model finds them, give ratio < 1', async () => {
    // Bytes of the completion as sampled (the toy tokenizer is byte-level).
    const tokenIds = [...Buffer.from('return a + b')];
    const step = async (name: string, logprob: number) => {
      const req = request();
      const samples = req.samples.map((s) => ({ ...s, sampled: { tokenIds, logprobs: tokenIds.map(() => logprob) } }));
      const trainer = new BridgeTrainer(
        { client: bridges(), role: 'code', options, root: path.join(root, name), batchDir: path.join(root, `${name}-batches`), reload: null },
        fresh,
      );
      return (await trainer.trainStep({ ...req, samples })).metrics;
    };
    const likelier = await step('old-likelier', -0.01);
    expect(likelier.oldLogprobRows).toBe(16);
    // A random byte-level model gives each byte about log(1/259) = -5.56: far below -0.01.
    expect(likelier.ratio_mean!).toBeLessThan(0.1);
    const near = await step('old-near', -5.6);
    expect(near.ratio_mean!).toBeGreaterThan(likelier.ratio_mean! * 10);
  }, 300_000);

  it('a step for a version already passed is refused before it reaches the bridge', async () => {
    const trainer = new BridgeTrainer(
      { client: bridges(), role: 'code', options, root: path.join(root, 'dup'), batchDir: path.join(root, 'dup-batches'), reload: null },
      fresh,
    );
    await trainer.trainStep(request());
    await expect(trainer.trainStep(request())).rejects.toThrow(/version 1, the request expected 0/);
  }, 300_000);
});
