/**
 * Starts gpu-bridge's own OpenAI-compatible `serve` (a real server over the toy model) on a free
 * loopback port, for tests of the openai backend against a real model server.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { DEFAULT_PYTHON, GPU_BRIDGE_DIR } from '../../src/bridge/index.js';

/** null when torch imports under the system interpreter, else why not (the reason a skip gives). */
export function torchMissing(): string | null {
  const r = spawnSync(DEFAULT_PYTHON, ['-c', 'import torch'], { encoding: 'utf8', timeout: 60_000 });
  if (r.error) return `${DEFAULT_PYTHON} cannot run: ${r.error.message}`;
  return r.status === 0 ? null : `torch does not import under ${DEFAULT_PYTHON}: ${r.stderr.trim().split('\n').pop()}`;
}

export interface BridgeServe {
  baseUrl: string;
  model: string;
  close(): Promise<void>;
}

/** `adminToken`: enables /admin/load_version (weight sync) with this bearer token. */
export async function startBridgeServe(opts: { seed?: number; config?: Record<string, number>; adminToken?: string } = {}): Promise<BridgeServe> {
  const model = 'toy-policy';
  const args = ['-m', 'gpu_bridge', 'serve', '--backend', 'toy', '--port', '0', '--device', 'cpu', '--seed', String(opts.seed ?? 0), '--served-model-name', model];
  if (opts.config) args.push('--config', JSON.stringify(opts.config));
  const child: ChildProcess = spawn(DEFAULT_PYTHON, args, {
    cwd: GPU_BRIDGE_DIR,
    env: { ...process.env, PYTHONPATH: GPU_BRIDGE_DIR, OMP_NUM_THREADS: '1', ...(opts.adminToken ? { GPU_BRIDGE_ADMIN_TOKEN: opts.adminToken } : {}) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      const m = /on http:\/\/[^:]+:(\d+)/.exec(stderr);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code, signal) => reject(new Error(`gpu_bridge serve exited (${code ?? signal}) before listening: ${stderr.slice(-2000)}`)));
  });
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    model,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
