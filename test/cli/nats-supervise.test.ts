/**
 * `crucible nats up --supervise`: a real nats-server SIGKILLed under a real supervisor process is
 * started again (same port, same store) with a timestamped line; `nats down` stops the servers
 * and ends the supervision without a restart; a signal to the supervisor stops its servers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nodeRuns, readCluster } from '../../src/nats-ops/nats-server.js';
import { runProcess } from '../support/cli.js';
import { until } from '../support/until.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-supervise-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The supervisor as a user's shell starts it, its stdout gathered. */
function supervisor(dir: string): { child: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['bin/crucible.js', 'nats', 'up', '--dir', dir, '--supervise'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, exited };
}

describe('nats up --supervise', () => {
  it('starts a killed server again on its port, and ends without a restart when `nats down` stops them', async () => {
    const dir = path.join(root, 'down');
    const s = supervisor(dir);
    try {
      await until('the supervisor to start', 30_000, async () => /supervising \(pid \d+\)/.test(s.out()));
      const [node] = readCluster(dir).nodes;
      process.kill(node!.pid, 'SIGKILL');
      const line = await until('the server to be started again', 30_000, async () => /^\S+Z n\d+ was not running: started again, pid (\d+)$/m.exec(s.out()));
      const again = readCluster(dir).nodes[0]!;
      expect(again.pid).toBe(Number(line[1]));
      expect(again.pid).not.toBe(node!.pid);
      expect(again.port).toBe(node!.port);
      expect(nodeRuns(dir, again)).toBe(true);
      const down = await runProcess(['nats', 'down', '--dir', dir]);
      expect(down.code, down.stderr).toBe(0);
      expect(down.stdout).toMatch(/stopped 1 nats-server/);
      expect(await s.exited).toBe(0);
      expect(s.out()).toMatch(/nats down stopped the servers: supervision ends/);
      // Nothing was started after down: one restart line in all.
      expect(s.out().match(/: started again, pid/g), s.out()).toHaveLength(1);
      expect(nodeRuns(dir, again)).toBe(false);
    } finally {
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
    }
  }, 90_000);

  it('a SIGTERM to the supervisor stops its servers', async () => {
    const dir = path.join(root, 'term');
    const s = supervisor(dir);
    try {
      await until('the supervisor to start', 30_000, async () => /supervising/.test(s.out()));
      const [node] = readCluster(dir).nodes;
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
      expect(s.out()).toMatch(/signalled: stopped 1 nats-server/);
      expect(readFileSync(path.join(dir, node!.name, 'nats.pid'), 'utf8').trim()).toBe(String(node!.pid));
      expect(nodeRuns(dir, node!)).toBe(false);
    } finally {
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
    }
  }, 90_000);
});
