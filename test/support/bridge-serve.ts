/**
 * gpu-bridge's own OpenAI-compatible `serve` (a real server over the toy model) for tests of the
 * openai backend, and whether torch is there to run it.
 */
import { spawnSync } from 'node:child_process';
import { DEFAULT_PYTHON, startServe, type ServeProcess } from '../../src/bridge/index.js';
import { capability } from './require.js';

/** null when torch imports under the system interpreter, else why not (the reason a skip gives). */
export function torchMissing(): string | null {
  const r = spawnSync(DEFAULT_PYTHON, ['-c', 'import torch'], { encoding: 'utf8', timeout: 60_000 });
  if (r.error) return capability('torch', `${DEFAULT_PYTHON} cannot run: ${r.error.message}`);
  return capability('torch', r.status === 0 ? null : `torch does not import under ${DEFAULT_PYTHON}: ${r.stderr.trim().split('\n').pop()}`);
}

export type BridgeServe = ServeProcess;

export function startBridgeServe(opts: { seed?: number; adminToken?: string } = {}): Promise<BridgeServe> {
  return startServe({ backend: 'toy', seed: opts.seed ?? 0, ...(opts.adminToken ? { adminToken: opts.adminToken } : {}) });
}
