/**
 * A `gpu_bridge serve` started by a process that then dies without stopping it (SIGKILL, a
 * crash, a SIGTERM nobody handled) ends too: startServe gives it its stdin as a pipe and
 * `--exit-with-stdin`, and the pipe closes with the process that held it. Real processes: a node
 * parent that starts the real server the way startServe does, SIGKILLed.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { torchMissing } from '../support/bridge-serve.js';
import { until } from '../support/until.js';
import { DEFAULT_PYTHON, GPU_BRIDGE_DIR } from '../../src/bridge/client.js';
import { startServe } from '../../src/bridge/serve-process.js';

const missing = torchMissing();

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(missing !== null)(`gpu_bridge serve ends with the process that started it${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  it('a parent SIGKILLed takes its server with it', async () => {
    // The parent starts the server on a pipe, says its pid once it listens, then waits.
    const script = `
      const { spawn } = require('node:child_process');
      const child = spawn(${JSON.stringify(DEFAULT_PYTHON)}, ['-m', 'gpu_bridge', 'serve', '--backend', 'toy', '--port', '0', '--config', '{"d_model":16,"n_layers":1,"n_heads":2,"d_ff":32,"max_seq_len":64}', '--exit-with-stdin'],
        { cwd: ${JSON.stringify(GPU_BRIDGE_DIR)}, env: { ...process.env, PYTHONPATH: ${JSON.stringify(GPU_BRIDGE_DIR)} }, stdio: ['pipe', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (d) => { err += d; if (/on http:/.test(err)) console.log(child.pid); });
      setInterval(() => {}, 1000);
    `;
    const parent = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const serverPid = await new Promise<number>((resolve, reject) => {
      let out = '';
      parent.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /^(\d+)\n/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      parent.on('exit', (code) => reject(new Error(`the parent exited (${code}) before its server listened`)));
    });
    expect(alive(serverPid)).toBe(true);
    parent.kill('SIGKILL');
    await until('the server ends after its parent', 30_000, async () => !alive(serverPid));
  }, 120_000);

  it('startServe starts it so: the server answers, and stops on close', async () => {
    const s = await startServe({ backend: 'toy', config: { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 64 } });
    try {
      const r = await fetch(`${s.baseUrl}/models`);
      expect(r.status).toBe(200);
    } finally {
      await s.close();
    }
    expect(alive(s.pid!)).toBe(false);
  }, 120_000);
});
