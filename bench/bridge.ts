/**
 * `crucible bench bridge [--seconds S] [--prompts P] [--n N] [--max-tokens T] [--threads K]`:
 * the gpu-bridge toy backend on CPU at demo-like shapes (a few problems x a group of samples,
 * prompts of a problem statement's length, completions of a short program's length):
 * - generation tokens/s through the protocol;
 * - GRPO training tokens/s through the protocol, beside a bare PyTorch loop on the same model and
 *   shapes (forward, NLL, backward, AdamW step; no bridge) measured in the same run;
 * - round-trip time per call (`status`) beside a bare Python echo over the same pipe and client.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { BridgeClient, DEFAULT_PYTHON, GPU_BRIDGE_DIR, writeBatch } from '../src/bridge/index.js';

const ECHO = [
  'import sys, json',
  'for line in sys.stdin:',
  '    req = json.loads(line)',
  '    sys.stdout.write(json.dumps({"id": req["id"], "ok": True, "result": {}}) + "\\n"); sys.stdout.flush()',
].join('\n');

function arg(args: string[], name: string, dflt: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : dflt;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);
  return v;
}

async function roundTrips(client: BridgeClient, seconds: number): Promise<{ calls: number; p50: number; p99: number; perS: number }> {
  const lat: number[] = [];
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  while (performance.now() < end) {
    const s = performance.now();
    await client.call('status', {}, z.unknown());
    lat.push(performance.now() - s);
  }
  const took = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  return { calls: lat.length, p50: q(0.5), p99: q(0.99), perS: lat.length / took };
}

/** The same model and batch shapes trained by a plain loop in one Python process. */
function bareTorch(cfg: object, batch: number, promptLen: number, complLen: number, micro: number, steps: number, threads: number): number {
  const code = `
import json, time, torch, sys
sys.path.insert(0, ${JSON.stringify(GPU_BRIDGE_DIR)})
from gpu_bridge.backends.toy import ToyLM, ToyConfig
torch.set_num_threads(${threads})
torch.manual_seed(0)
m = ToyLM(ToyConfig(**json.loads(${JSON.stringify(JSON.stringify(cfg))})))
opt = torch.optim.AdamW(m.parameters(), lr=1e-5)
ids = torch.randint(0, 256, (${batch}, ${promptLen + complLen}))
def step():
    for i in range(0, ${batch}, ${micro}):
        x = ids[i:i + ${micro}]
        logits, _ = m(x)
        lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, x[:, 1:].unsqueeze(-1)).squeeze(-1)
        (-lp[:, ${promptLen - 1}:].sum() / (${batch} * ${complLen})).backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step(); opt.zero_grad(set_to_none=True)
step()
t = time.perf_counter()
for _ in range(${steps}): step()
print(${steps} * ids.numel() / (time.perf_counter() - t))
`;
  const r = spawnSync(DEFAULT_PYTHON, ['-c', code], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`bare torch baseline failed: ${r.stderr}`);
  return Number(r.stdout.trim());
}

export async function runBench(args: string[]): Promise<void> {
  const seconds = arg(args, '--seconds', 3);
  const prompts = arg(args, '--prompts', 4);
  const n = arg(args, '--n', 4);
  const maxTokens = arg(args, '--max-tokens', 128);
  // One thread by default: on a shared, oversubscribed machine torch's OpenMP threads spin-wait
  // on each other (measured: 2 threads generated ~7x slower than 1 under load).
  const threads = arg(args, '--threads', 1);
  const cfg = { d_model: 128, n_layers: 2, n_heads: 4, d_ff: 512, max_seq_len: 1024 };
  const promptLen = 256;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-bridge-'));
  const { client, hello } = await BridgeClient.start({ args: ['--threads', String(threads)] });
  try {
    const pol = await client.loadPolicy({ backend: 'toy', config: cfg, seed: 0 });
    const statement = 'Given an array of n integers, print the sum of the k largest values. '.repeat(8).slice(0, promptLen - 1);
    const ps = Array.from({ length: prompts }, (_, i) => `${i}${statement}`.slice(0, promptLen - 1));
    await client.generate({ prompts: ps.slice(0, 1), n: 1, max_tokens: 4 }); // warm up
    const g = await client.generate({ prompts: ps, n, max_tokens: maxTokens, temperature: 1, seed: 1, stop: [] });
    // Train on completions of exactly max_tokens bytes (the toy model rarely stops early).
    const rows = ps.flatMap((p, i) =>
      Array.from({ length: n }, (_, j) => ({ prompt: p, completion: 'x'.repeat(maxTokens - 1) + String(j % 10), advantage: (j % 2 ? 1 : -1) * (1 + i / 10) })),
    );
    const micro = Math.max(1, Math.floor(rows.length / 4));
    const train: number[] = [];
    let seq = 0;
    const tEnd = performance.now() + seconds * 1000;
    for (let step = 0; step < 2 || performance.now() < tEnd; step++) {
      const batch = await writeBatch(
        path.join(dir, `b${seq}.jsonl`),
        'grpo',
        rows.map((r) => ({ ...r, advantage: r.advantage + seq * 1e-3 })),
      );
      const r = await client.trainStep({ batch_id: `b${seq}`, expected_version: seq, algorithm: 'grpo', batch, micro_batch_size: micro, hyper: { lr: 1e-5 } });
      seq++;
      if (step > 0) train.push(r.tokens_per_s ?? NaN); // step 0 warms up
    }
    const trainTps = train.reduce((a, b) => a + b, 0) / train.length;
    const bare = bareTorch(cfg, rows.length, promptLen, maxTokens, micro, train.length, threads);
    const rt = await roundTrips(client, seconds);
    const echo = BridgeClient.open({ command: { file: DEFAULT_PYTHON, args: ['-c', ECHO] } });
    const rtEcho = await roundTrips(echo, seconds);
    echo.kill();
    const line = (s: string) => process.stdout.write(s + '\n');
    line(
      `bridge bench: toy backend (${pol.params} params, d_model ${cfg.d_model}, ${cfg.n_layers} layers) on ${hello.device.type} ${hello.device.name}, ${threads} torch threads, ${os.cpus().length} cores`,
    );
    line(
      `generation  ${prompts} prompts x n=${n}, prompt ${promptLen} tokens, max_tokens ${maxTokens}: ${g.tokens} tokens in ${g.seconds.toFixed(2)} s = ${(g.tokens_per_s ?? 0).toFixed(0)} tokens/s`,
    );
    line(
      `training    grpo, ${rows.length} samples x ${promptLen + maxTokens} tokens, micro-batch ${micro}, ${train.length} steps: ${trainTps.toFixed(0)} tokens/s`,
    );
    line(
      `  baseline  bare torch loop, same model and shapes, no bridge:            ${bare.toFixed(0)} tokens/s (bridge at ${((trainTps / bare) * 100).toFixed(0)}%)`,
    );
    line(`round trip  bridge status: ${rt.perS.toFixed(0)} calls/s, p50 ${rt.p50.toFixed(3)} ms, p99 ${rt.p99.toFixed(3)} ms`);
    line(
      `  baseline  bare python echo, same pipe and client: ${rtEcho.perS.toFixed(0)} calls/s, p50 ${rtEcho.p50.toFixed(3)} ms, p99 ${rtEcho.p99.toFixed(3)} ms`,
    );
    line(`  protocol overhead per call over the echo: ${(rt.p50 - rtEcho.p50).toFixed(3)} ms (p50)`);
  } finally {
    await client.shutdown();
    await rm(dir, { recursive: true, force: true });
  }
}
