/**
 * The version of gpu-bridge's training code: a sha256 over the sources whose change can change
 * what a training step or a published checkpoint holds (the step and its losses, the batch
 * encoding, the models, how a checkpoint and its optimizer state are written). A cached result
 * of training is keyed by it, so an edit of any of them leaves the old entries unused rather
 * than passing them off as this code's.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { GPU_BRIDGE_DIR } from './client.js';

const SOURCES = [
  'gpu_bridge/__init__.py',
  'gpu_bridge/batch.py',
  'gpu_bridge/bridge.py',
  'gpu_bridge/checkpoint.py',
  'gpu_bridge/losses.py',
  'gpu_bridge/trainer.py',
  'gpu_bridge/backends/__init__.py',
  'gpu_bridge/backends/hf.py',
  'gpu_bridge/backends/toy.py',
];

let memo: string | null = null;

export function trainerCodeVersion(): string {
  if (memo !== null) return memo;
  const h = createHash('sha256');
  for (const name of SOURCES)
    h.update(
      `${name}\u0000${createHash('sha256')
        .update(readFileSync(path.join(GPU_BRIDGE_DIR, name)))
        .digest('hex')}\n`,
    );
  memo = h.digest('hex');
  return memo;
}
