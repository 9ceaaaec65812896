/**
 * The demo with its log on JetStream, as a user runs it: `crucible nats up`, `run --log nats://`,
 * `log export`, `replay --verify`, `log import`, `nats down` -- real commands, a real nats-server.
 * `nats up` and `nats down` run as processes of their own (the servers outlive the first); the
 * other commands run in this process through the CLI's entry point, as bin/crucible.js calls it.
 */
import { smallDemoArgs } from '../support/small-config.js';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { runMain, runProcess } from '../support/cli.js';
import { natsServerBinary, natsUp, stopNode } from '../../src/nats-ops/nats-server.js';
import { until } from '../support/until.js';
import { featuresOf } from '../../src/events/jetstream/jetstream-log.js';

const crucible = runMain;
const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-js-cli-'));
const natsDir = path.join(dir, 'nats');

const crucibleProcess = runProcess;

// Both runs share the config (so the run id and seed), each with its own run directory.
const small = [...smallDemoArgs(dir), '--json'];
type Row = Record<string, unknown> & { runId: string; round: number };
const rowsOf = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Row);
/** The table without wall times (and the run id the run command adds). */
const figures = (rows: Row[]) => rows.map(({ seconds: _s, runId: _r, ...rest }) => rest);

let url = '';
// `nats up` lets in only clients with a role's credentials: the run (every role in one process)
// as admin, the reads as reader.
const admin = path.join(natsDir, 'admin.creds.json');
const reader = path.join(natsDir, 'reader.creds.json');
beforeAll(async () => {
  const up = await crucibleProcess(['nats', 'up', '--dir', natsDir]);
  expect(up.code, up.stderr).toBe(0);
  url = /log location: (\S+)/.exec(up.stdout)![1]!;
}, 30_000);
afterAll(async () => {
  const down = await crucibleProcess(['nats', 'down', '--dir', natsDir]);
  expect(down.stdout).toMatch(/stopped 1 nats-server/);
  rmSync(dir, { recursive: true, force: true });
});

describe('the demo on JetStream', () => {
  it('gives the same per-round table as on SQLite; after export, replay --verify passes; import goes back', async () => {
    const onSqlite = await crucible(['run', 'configs/demo.yaml', ...small, '--dir', path.join(dir, 'sqlite')]);
    expect(onSqlite.code, onSqlite.stderr).toBe(0);
    const onNats = await crucible(['run', 'configs/demo.yaml', ...small, '--dir', path.join(dir, 'nats-run'), '--log', url, '--creds', admin]);
    expect(onNats.code, onNats.stderr).toBe(0);
    const a = rowsOf(onSqlite.stdout);
    const b = rowsOf(onNats.stdout);
    expect(a.map((r) => r.round)).toEqual([1, 2]);
    expect(figures(b)).toEqual(figures(a));
    const runId = b[0]!.runId;

    // The run directory of a JetStream run points at its log; replay reads it there.
    expect(JSON.parse(readFileSync(path.join(dir, 'nats-run', 'log.json'), 'utf8'))).toEqual({ location: url, runId });
    const refused = await crucible(['replay', path.join(dir, 'nats-run'), '--verify']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/refused the connection: it requires credentials.*--creds/);
    const direct = await crucible(['replay', path.join(dir, 'nats-run'), '--verify', '--creds', reader]);
    expect(direct.code, direct.stderr).toBe(0);
    expect(direct.stdout).toMatch(/verified: every read model compared equals its replay/);

    const exported = await crucible(['log', 'export', '--from', url, '--run', runId, '--to', path.join(dir, 'nats-run'), '--creds', reader]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toMatch(new RegExp(`run ${runId}: \\d+ commits \\(0 already there\\), \\d+ events, [1-9]\\d* blobs`));
    expect(existsSync(path.join(dir, 'nats-run', 'log.db'))).toBe(true);
    const verify = await crucible(['replay', path.join(dir, 'nats-run'), '--verify', '--json']);
    expect(verify.code, verify.stderr).toBe(0);
    const replayed = JSON.parse(verify.stdout) as { verified: boolean; rows: Row[] };
    expect(replayed.verified).toBe(true);
    expect(figures(replayed.rows)).toEqual(figures(a));

    // The SQLite run into JetStream (the same run id: every commit is already there).
    const imported = await crucible(['log', 'import', '--from', path.join(dir, 'sqlite'), '--to', url, '--creds', admin]);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stdout).toMatch(/\((\d+) already there\)/);
    const fromNats = await crucible(['replay', url, '--run', runId, '--json', '--creds', reader]);
    expect(fromNats.code, fromNats.stderr).toBe(0);
    expect(figures((JSON.parse(fromNats.stdout) as { rows: Row[] }).rows)).toEqual(figures(a));
  }, 240_000);

  it('exits 2 with a clear message when no nats-server answers', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', ...small, '--dir', path.join(dir, 'nowhere'), '--log', 'nats://127.0.0.1:1']);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/cannot reach the event log at nats:\/\/127\.0\.0\.1:1.*nats up/);
  });

  it('refuses a second `nats up` on a directory whose servers run', async () => {
    const again = await crucibleProcess(['nats', 'up', '--dir', natsDir]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already has running nats-servers/);
  });

  it('`nats up --nodes 3` warns of a server whose replicas can part ways after a failover, and only then', async () => {
    const three = path.join(dir, 'three');
    const up = await crucibleProcess(['nats', 'up', '--dir', three, '--nodes', '3', '--no-auth']);
    try {
      expect(up.code, up.stderr).toBe(0);
      const version = /nats-server (\S+):/.exec(up.stdout)![1]!;
      const warned = /crucible: warning: nats-server \S+ on a cluster: .*Run a cluster on nats-server 2\.10 or newer/.test(up.stderr);
      expect(warned, up.stderr).toBe(!featuresOf(version).replicasAgreeAfterFailover);
    } finally {
      await crucibleProcess(['nats', 'down', '--dir', three]);
    }
  }, 60_000);
});

describe('nats down', () => {
  it("stops a server that was started again by hand with its node's config", async () => {
    const byHandDir = path.join(dir, 'by-hand');
    const cluster = await natsUp({ nodes: 1, dir: byHandDir });
    const node = cluster.nodes[0]!;
    await stopNode(node, 'SIGKILL');
    // As a person would: the same config, a process `up` never knew.
    const byHand = spawn(natsServerBinary(), ['-c', node.configFile], { stdio: 'ignore' });
    const exited = new Promise<void>((resolve) => byHand.once('exit', () => resolve()));
    try {
      await until(
        'the server started by hand to write its pid',
        15_000,
        async () => readFileSync(path.join(byHandDir, node.name, 'nats.pid'), 'utf8').trim() === String(byHand.pid),
      );
      const down = await crucibleProcess(['nats', 'down', '--dir', byHandDir]);
      expect(down.code, down.stderr).toBe(0);
      expect(down.stdout).toMatch(/stopped 1 nats-server/);
      await exited;
      expect(byHand.signalCode ?? byHand.exitCode).not.toBeNull();
    } finally {
      if (byHand.exitCode === null && byHand.signalCode === null) byHand.kill('SIGKILL');
    }
  }, 60_000);
});
