/**
 * Runs gpu-bridge's Python unittest suite (losses, trainer, checkpoints, stdio/TCP/serve) under
 * the system interpreter, so `npm test` covers the Python side too.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PYTHON, GPU_BRIDGE_DIR } from '../../src/bridge/index.js';

describe('gpu-bridge python suite', () => {
  it('passes under /usr/bin/python3 -m unittest', () => {
    const r = spawnSync(DEFAULT_PYTHON, ['-m', 'unittest', 'discover', '-s', path.join(GPU_BRIDGE_DIR, 'tests'), '-t', path.join(GPU_BRIDGE_DIR, 'tests')], {
      cwd: GPU_BRIDGE_DIR,
      encoding: 'utf8',
      env: { ...process.env, OMP_NUM_THREADS: '1' },
      timeout: 300_000,
    });
    const out = `${r.stdout}\n${r.stderr}`;
    // unittest prints "Ran N tests" and "OK" (or "FAILED (...)") on stderr.
    expect(r.error, out).toBeUndefined();
    expect(r.status, out.slice(-6000)).toBe(0);
    const ran = /Ran (\d+) tests?/.exec(out);
    expect(Number(ran?.[1] ?? 0)).toBeGreaterThan(30);
  }, 300_000);
});
