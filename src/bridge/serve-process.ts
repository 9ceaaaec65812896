/**
 * Starts gpu-bridge's OpenAI-compatible `serve` (`python3 -m gpu_bridge serve`) on a loopback
 * port (a free one by default) and says where it listens, once it does. The server batches
 * concurrent requests (`batchWindowMs`, `maxBatchRows`).
 */
import { spawn } from 'node:child_process';
import { DEFAULT_PYTHON, GPU_BRIDGE_DIR } from './client.js';
import { BridgeDeadError } from './errors.js';

export interface ServeProcess {
  /** e.g. http://127.0.0.1:41234/v1 */
  baseUrl: string;
  model: string;
  pid: number | undefined;
  close(): Promise<void>;
}

export interface ServeOptions {
  backend?: 'toy' | 'hf';
  model?: string;
  /** toy: the model shape (random weights from `seed`). */
  config?: Record<string, unknown>;
  seed?: number;
  port?: number;
  device?: string;
  servedModelName?: string;
  /** Enables /admin/load_version (weight sync) with this bearer token. */
  adminToken?: string;
  python?: string;
  /** torch CPU threads of the server (OMP_NUM_THREADS). */
  threads?: number;
  /** How long a request waits for others to share its batch (default 5; it goes at once when
   * every open connection has a request in). */
  batchWindowMs?: number;
  /** Rows (prompts x n) decoded together at most (default 256). */
  maxBatchRows?: number;
}

/** The environment that caps a bridge process's CPU threads: torch's own (OpenMP) and those of
 * an OpenBLAS built with pthreads, which ignores OMP_NUM_THREADS. */
export function threadEnv(threads: number): Record<string, string> {
  return { OMP_NUM_THREADS: String(threads), OPENBLAS_NUM_THREADS: String(threads) };
}

export async function startServe(opts: ServeOptions = {}): Promise<ServeProcess> {
  const model = opts.servedModelName ?? `${opts.backend ?? 'toy'}-policy`;
  const args = [
    '-m',
    'gpu_bridge',
    'serve',
    '--backend',
    opts.backend ?? 'toy',
    '--port',
    String(opts.port ?? 0),
    '--device',
    opts.device ?? 'cpu',
    '--seed',
    String(opts.seed ?? 0),
    '--served-model-name',
    model,
    // The server ends with this process, however it ends: its stdin is our pipe.
    '--exit-with-stdin',
  ];
  if (opts.model) args.push('--model', opts.model);
  if (opts.config) args.push('--config', JSON.stringify(opts.config));
  if (opts.batchWindowMs !== undefined) args.push('--batch-window-ms', String(opts.batchWindowMs));
  if (opts.maxBatchRows !== undefined) args.push('--max-batch-rows', String(opts.maxBatchRows));
  const child = spawn(opts.python ?? DEFAULT_PYTHON, args, {
    cwd: GPU_BRIDGE_DIR,
    env: {
      ...process.env,
      PYTHONPATH: GPU_BRIDGE_DIR,
      ...threadEnv(opts.threads ?? 1),
      ...(opts.adminToken ? { GPU_BRIDGE_ADMIN_TOKEN: opts.adminToken } : {}),
    },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      const m = /on http:\/\/[^:\s]+:(\d+)/.exec(stderr);
      if (m) resolve(Number(m[1]));
    });
    child.on('error', (e) => reject(new BridgeDeadError(`gpu_bridge serve did not start: ${e.message}`, '')));
    child.on('exit', (code, signal) => reject(new BridgeDeadError(`gpu_bridge serve exited (${code ?? signal}) before listening`, stderr.slice(-2000))));
  });
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    model,
    pid: child.pid,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
