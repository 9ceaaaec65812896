/**
 * `crucible bench warm-start [--steps N] [--every K] [--threads T]`: what recording the warm start
 * costs. Through one gpu-bridge process and the BridgeTrainer, at configs/neural-demo.yaml's
 * model and SFT shapes (its four problems' code rows, batches of 12): N SFT steps, and after every
 * K a checkpoint as the warm start records one (publish: weights and AdamW state written and
 * synced; then each file into a SQLite log's blob store). The baseline is the steps themselves,
 * in the same run: the cost of recording every K steps is the checkpoint's time over K steps'.
 * Also the bytes a checkpoint adds (to the checkpoint folder, and again to the blob store).
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BridgeClient, threadEnv } from '../src/bridge/index.js';
import { BridgeTrainerOptions } from '../src/config/openai.js';
import { BridgeTrainer } from '../src/policies/bridge-trainer.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { loadDemoProblems } from '../src/datasets/demo/index.js';
import { sftRows } from '../src/policies/openai/sft.js';
import { sftBatch } from '../src/actors/warm-start.js';

function arg(args: string[], name: string, dflt: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : dflt;
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name} must be a positive whole number`);
  return v;
}

const bytesUnder = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce(
    (s, e) => s + (e.isDirectory() ? bytesUnder(path.join(dir, e.name)) : statSync(path.join(dir, e.name)).size),
    0,
  );

export async function runBench(args: string[]): Promise<void> {
  const steps = arg(args, '--steps', 40);
  const every = arg(args, '--every', 10);
  const threads = arg(args, '--threads', 1);
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-warm-start-'));
  const log = await openSqliteLog(path.join(scratch, 'log.db'));
  let client: BridgeClient | null = null;
  try {
    client = (await BridgeClient.start({ env: threadEnv(threads), timeoutMs: 600_000 })).client;
    const bridge = client;
    const ids = ['demo/digital-root', 'demo/range-sum', 'demo/time-format', 'demo/word-count'];
    const rows = loadDemoProblems()
      .filter((p) => ids.includes(p.id))
      .flatMap((p) => sftRows(p, 'code', { method: 'code-a1', whiteBox: true, suiteSize: 4, prompts: 'brief' }));
    const options = BridgeTrainerOptions.parse({
      backend: 'toy',
      seed: 0,
      device: 'cpu',
      config: { d_model: 64, n_layers: 2, n_heads: 4, d_ff: 256, max_seq_len: 512 },
    });
    const root = path.join(scratch, 'checkpoints', 'code');
    const trainer = new BridgeTrainer(
      { client: async () => bridge, role: 'code', options, root, batchDir: path.join(scratch, 'batches'), reload: null, blobs: log.blobs },
      JSON.stringify({ backend: 'bridge', version: 0, checkpoint: null }),
    );
    const stepSeconds: number[] = [];
    const checkpointSeconds: number[] = [];
    for (let step = 1; step <= steps; step++) {
      const samples = sftBatch(rows, 7, 12, step).map((r) => ({
        prompt: r.prompt,
        response: r.completion,
        advantage: 0,
        contextKey: r.problemId,
        choiceKey: null,
      }));
      const t0 = performance.now();
      await trainer.trainStep({ batchId: `bench/sft/${step}`, role: 'code', expectedVersion: step - 1, algorithm: 'sft', samples, hyper: { lr: 0.003 } });
      // The first step loads the model into the bridge: not a step's cost.
      if (step > 1) stepSeconds.push((performance.now() - t0) / 1000);
      if (step % every === 0) {
        const t1 = performance.now();
        await trainer.checkpoint();
        checkpointSeconds.push((performance.now() - t1) / 1000);
      }
    }
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);
    const step = mean(stepSeconds);
    const checkpoint = mean(checkpointSeconds);
    const perCheckpoint = bytesUnder(root) / Math.max(1, checkpointSeconds.length);
    console.log(
      `warm start at the neural demo's shapes (${rows.length} code rows, batches of 12), ${steps} SFT steps, a checkpoint every ${every}, ${threads} thread(s)`,
    );
    console.log(`SFT step (baseline): ${step.toFixed(3)} s mean over ${stepSeconds.length}`);
    console.log(`checkpoint (publish + blob store): ${checkpoint.toFixed(3)} s mean over ${checkpointSeconds.length}`);
    console.log(`recording every ${every} steps adds ${((100 * checkpoint) / (every * step)).toFixed(1)}% to the warm start's steps`);
    console.log(`a checkpoint holds ${(perCheckpoint / 1e6).toFixed(2)} MB (in the checkpoint folder, and again in the blob store)`);
  } finally {
    await client?.shutdown();
    await log.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
