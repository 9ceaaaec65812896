/**
 * The TypeScript client against a real gpu-bridge (toy backend, /usr/bin/python3), and against
 * small stand-in programs that misbehave on purpose (malformed lines, silence, crashing).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, appendFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  BridgeClient,
  BridgeDeadError,
  BridgeProtocolError,
  BridgeRemoteError,
  BridgeRequestTooLargeError,
  BridgeTimeoutError,
  DEFAULT_PYTHON,
  GPU_BRIDGE_DIR,
  writeBatch,
  type BridgeEvent,
} from '../../src/bridge/index.js';

const TINY = { d_model: 32, n_layers: 2, n_heads: 2, d_ff: 64, max_seq_len: 256 };

/** A program standing in for a broken bridge: answers each request line with `reply(req)`. */
function standInBridge(replyPy: string): { file: string; args: string[] } {
  const code = [
    'import sys, json',
    'for line in sys.stdin:',
    '    req = json.loads(line)',
    `    out = ${replyPy}`,
    '    if out is not None:',
    '        sys.stdout.write(out + "\\n"); sys.stdout.flush()',
  ].join('\n');
  return { file: DEFAULT_PYTHON, args: ['-c', code] };
}

describe('BridgeClient with a real bridge', () => {
  let dir: string;
  let client: BridgeClient;
  const events: BridgeEvent[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bridge-client-'));
    ({ client } = await BridgeClient.start({ args: ['--max-request-bytes', '65536', '--heartbeat', '0.2'], onEvent: (e) => events.push(e) }));
  });
  afterAll(async () => {
    await client?.shutdown();
    await rm(dir, { recursive: true, force: true });
  });

  it('says hello with capabilities and loads, samples, trains, publishes', async () => {
    const h = await client.hello();
    expect(h.protocol).toBe(1);
    expect(h.capabilities.backends.toy!.available).toBe(true);
    expect(h.capabilities.ops).toContain('train_step');
    const p = await client.loadPolicy({ backend: 'toy', config: TINY, seed: 1, reference: true });
    expect(p.version).toBe(0);
    const g = await client.generate({ prompts: ['def f():', 'x ='], n: 2, max_tokens: 6, seed: 3, logprobs: true });
    expect(g.outputs).toHaveLength(2);
    expect(g.outputs[0]).toHaveLength(2);
    const s = g.outputs[0]![0]!;
    expect(s.logprobs).toHaveLength(s.token_ids.length);
    const rows = g.outputs
      .flatMap((group, i) =>
        group.map((o, j) => ({ prompt: ['def f():', 'x ='][i]!, completion_ids: o.token_ids, old_logprobs: o.logprobs, advantage: j === 0 ? 1 : -1 })),
      )
      .map(({ prompt, ...r }) => ({ ...r, prompt_ids: [256, ...Buffer.from(prompt, 'utf8')] }));
    const batch = await writeBatch(path.join(dir, 'b1.jsonl'), 'grpo', rows);
    const step = await client.trainStep({ batch_id: 'b1', expected_version: 0, algorithm: 'grpo', batch, micro_batch_size: 2, hyper: { kl_coef: 0.01 } });
    expect(step.version).toBe(1);
    expect(step.duplicate).toBe(false);
    expect(step.micro_batches).toBe(2);
    // generated with the same weights: every ratio is 1 before the update, nothing clipped
    expect(step.clip_fraction).toBe(0);
    expect(events.some((e) => e.event === 'progress' && e.op === 'train_step')).toBe(true);
    const again = await client.trainStep({ batch_id: 'b1', expected_version: 0, algorithm: 'grpo', batch });
    expect(again.duplicate).toBe(true);
    expect((await client.status()).policies.default!.version).toBe(1);
    const pub = await client.publish({ root: path.join(dir, 'versions') });
    expect(pub.version).toBe(1);
    expect(pub.path.endsWith('v000001')).toBe(true);
  });

  it('turns refusals into typed remote errors and keeps going', async () => {
    const batch = await writeBatch(path.join(dir, 'b2.jsonl'), 'sft', [{ prompt: 'a', completion: 'b' }]);
    const wrongVersion = client.trainStep({ batch_id: 'b2', expected_version: 7, algorithm: 'sft', batch });
    await expect(wrongVersion).rejects.toBeInstanceOf(BridgeRemoteError);
    await expect(wrongVersion).rejects.toMatchObject({ code: 'version_mismatch', retryable: false });
    await appendFile(batch.path, '{"prompt":"x","completion":"y"}\n');
    await expect(client.trainStep({ batch_id: 'b2', expected_version: 1, algorithm: 'sft', batch })).rejects.toMatchObject({ code: 'hash_mismatch' });
    const unknown = client.call('warp_drive', {}, z.unknown());
    await expect(unknown).rejects.toMatchObject({ code: 'unknown_op', op: 'warp_drive' });
    await expect(unknown).rejects.toThrow(/unknown op 'warp_drive'/);
    expect(client.alive).toBe(true);
    expect((await client.status()).requests).toBeGreaterThan(0);
  });

  it('refuses an oversized request before sending it (limit learned from hello)', async () => {
    const big = client.generate({ prompts: ['x'.repeat(70_000)] });
    await expect(big).rejects.toBeInstanceOf(BridgeRequestTooLargeError);
    await expect(big).rejects.toThrow(/over the limit of 65536/);
    expect(client.alive).toBe(true);
    await client.status();
  });

  it('rejects invalid batch rows before writing', async () => {
    await expect(writeBatch(path.join(dir, 'bad.jsonl'), 'grpo', [{ prompt: 'a', completion: 'b' }])).rejects.toThrow(/row 1 is not a valid grpo row/);
  });

  it('receives heartbeats', async () => {
    await new Promise((r) => setTimeout(r, 500));
    expect(events.some((e) => e.event === 'heartbeat')).toBe(true);
  });
});

describe('BridgeClient when the bridge misbehaves', () => {
  it('a bridge killed mid-call fails the call and every later one as dead', async () => {
    const { client } = await BridgeClient.start();
    await client.loadPolicy({ backend: 'toy', config: TINY });
    // Work of seconds, killed at once: the call is outstanding whatever the machine's speed (a
    // timer of a few hundred ms raced a generation that batching made fast).
    const long = client.generate({ prompts: ['a'], n: 256, max_tokens: 400 });
    setImmediate(() => process.kill(client.pid!, 'SIGKILL'));
    await expect(long).rejects.toBeInstanceOf(BridgeDeadError);
    await expect(long).rejects.toThrow(/killed by SIGKILL/);
    await expect(client.status()).rejects.toBeInstanceOf(BridgeDeadError);
    expect(client.alive).toBe(false);
  });

  it('a bridge that dies at start reports its exit code and stderr', async () => {
    const start = BridgeClient.start({ command: { file: DEFAULT_PYTHON, args: ['-c', 'import sys; sys.stderr.write("no CUDA today\\n"); sys.exit(3)'] } });
    await expect(start).rejects.toBeInstanceOf(BridgeDeadError);
    await expect(start).rejects.toThrow(/exited with code 3[\s\S]*no CUDA today/);
  });

  it('a missing interpreter is a dead bridge, not a hang', async () => {
    await expect(BridgeClient.start({ python: '/nonexistent/python3' })).rejects.toThrow(/could not run \/nonexistent\/python3/);
  });

  it('a line that is not JSON is a protocol error and closes the client', async () => {
    const start = BridgeClient.start({ command: standInBridge('"Loading checkpoint shards: 100%"') });
    await expect(start).rejects.toBeInstanceOf(BridgeProtocolError);
    await expect(start).rejects.toThrow(/not JSON: "Loading checkpoint shards: 100%"/);
  });

  it('a reply of the wrong shape is a protocol error', async () => {
    const start = BridgeClient.start({ command: standInBridge('json.dumps({"id": req["id"], "ok": True, "result": {"protocol": 1}})') });
    await expect(start).rejects.toThrow(/hello reply has an unexpected shape/);
  });

  it('a reply to an id never sent is a protocol error', async () => {
    const start = BridgeClient.start({ command: standInBridge('json.dumps({"id": 999, "ok": True, "result": {}})') });
    await expect(start).rejects.toThrow(/unknown request id 999/);
  });

  it('a silent bridge times out, retryable, and a late reply is not an error', async () => {
    const client = BridgeClient.open({ command: standInBridge('None') });
    const call = client.call('status', {}, z.unknown(), { timeoutMs: 300 });
    await expect(call).rejects.toBeInstanceOf(BridgeTimeoutError);
    await expect(call).rejects.toMatchObject({ retryable: true, op: 'status' });
    expect(client.alive).toBe(true);
    client.kill();
    await client.exited();
  });

  it('a bridge that goes silent (no reply, no heartbeat) is declared dead', async () => {
    // Answers the first request, then never again.
    const client = BridgeClient.open({
      command: standInBridge('json.dumps({"id": req["id"], "ok": True, "result": {}}) if req["id"] == 1 else None'),
      staleAfterMs: 300,
    });
    await client.call('status', {}, z.unknown());
    const call = client.call('status', {}, z.unknown(), { timeoutMs: 10_000 });
    await expect(call).rejects.toBeInstanceOf(BridgeDeadError);
    await expect(call).rejects.toThrow(/no line \(reply or heartbeat\) for over 300 ms/);
    await client.exited();
    expect(client.alive).toBe(false);
  });

  it('a live bridge heartbeating through a long call is not declared dead', async () => {
    const { client } = await BridgeClient.start({ args: ['--heartbeat', '0.1'], staleAfterMs: 1_500 });
    try {
      await client.loadPolicy({ backend: 'toy', config: TINY });
      const g = await client.generate({ prompts: ['a', 'b', 'c'], n: 8, max_tokens: 48 });
      expect(g.outputs).toHaveLength(3);
    } finally {
      await client.shutdown();
    }
  });

  it('an oversized request the bridge refuses comes back as too_large', async () => {
    // The client's own limit is higher than the bridge's: the bridge must catch it.
    const client = BridgeClient.open({ args: ['--max-request-bytes', '2048'], maxRequestBytes: 1 << 20 });
    try {
      const big = client.call('generate', { prompts: ['y'.repeat(10_000)] }, z.unknown());
      await expect(big).rejects.toMatchObject({ code: 'too_large', retryable: false });
      await expect(big).rejects.toThrow(/exceeds the limit of 2048 bytes/);
      await client.status(); // the bridge skipped the line and lives on
    } finally {
      await client.shutdown();
    }
  });
});

describe('BridgeClient over TCP', () => {
  it('connects with the token, and is refused without it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bridge-tcp-'));
    const token = 'tcp-test-token-0123456789';
    await writeFile(path.join(dir, 'token'), token);
    const child = spawn(DEFAULT_PYTHON, ['-m', 'gpu_bridge', '--listen', '127.0.0.1:0', '--token-file', path.join(dir, 'token')], {
      env: { ...process.env, PYTHONPATH: GPU_BRIDGE_DIR },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let err = '';
        child.stderr.setEncoding('utf8');
        child.stderr.on('data', (d: string) => {
          err += d;
          const m = /listening on 127\.0\.0\.1:(\d+)/.exec(err);
          if (m) resolve(Number(m[1]));
        });
        child.on('exit', () => reject(new Error(`bridge exited: ${err}`)));
      });
      const refused = BridgeClient.connect({ host: '127.0.0.1', port, token: 'not-the-token-0123456789' });
      await expect(refused).rejects.toMatchObject({ code: 'unauthorized' });
      const { client, hello } = await BridgeClient.connect({ host: '127.0.0.1', port, token });
      expect(hello.protocol).toBe(1);
      await client.loadPolicy({ backend: 'toy', config: TINY });
      expect((await client.status()).policies.default!.version).toBe(0);
      client.kill();
      await client.exited();
      await expect(client.status()).rejects.toThrow(/connection to 127.0.0.1:\d+ closed/);
      await expect(BridgeClient.connect({ host: '127.0.0.1', port: 1, token })).rejects.toThrow(/connection to 127.0.0.1:1 failed/);
    } finally {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
