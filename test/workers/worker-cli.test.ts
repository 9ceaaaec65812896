/**
 * `crucible worker`, `crucible status` and `run --workers` given what they cannot work with:
 * one clear line and an exit status, through the CLI's own error mapping (real nats-server).
 */
import { STATUS_OPEN_MS } from '../../src/workers/status.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { freePort } from '../../src/nats-ops/nats-server.js';
import { startTestNats, type TestNats } from '../support/nats.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkerSupervisor } from '../../src/workers/supervisor.js';
import { EXIT_READ_AGAIN } from '../../src/workers/errors.js';
import { LogRewrittenError, MissingLogMessageError } from '../../src/events/errors.js';
import { spawn } from 'node:child_process';
import { until } from '../support/until.js';
import { natsDown, natsUp, type NatsCluster } from '../../src/nats-ops/nats-server.js';
import { credentialsFile, readCredentials } from '../../src/events/jetstream/nats-roles.js';
import { writeCredentials } from '../../src/nats-ops/credentials.js';
import { runExperiment } from '../../src/actors/run.js';
import { twoProblemConfig } from '../support/small-config.js';
import { catalogCache } from '../support/catalog-cache.js';

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats(1);
}, 60_000);
afterAll(async () => {
  await nats?.stop();
});

/** Runs the CLI in this process; its exit status and what it printed on stderr. */
async function cli(args: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string) => ((err += chunk), true)) as typeof process.stderr.write;
  const before = process.exitCode;
  process.exitCode = 0;
  try {
    await main(['node', 'crucible', ...args]);
    return { code: Number(process.exitCode ?? 0), err };
  } finally {
    process.stderr.write = write;
    process.exitCode = before;
  }
}

describe('worker errors', () => {
  it('a run that does not exist', async () => {
    const r = await cli(['worker', '--role', 'judge', '--log', nats.urls[0]!, '--run', 'demo-s7-00000000']);
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `crucible: run demo-s7-00000000 does not exist at ${nats.urls[0]} (no RunStarted recorded; \`crucible run CONFIG --log ${nats.urls[0]}\` starts it)\n`,
    );
    const s = await cli(['status', '--log', nats.urls[0]!, '--run', 'demo-s7-00000000']);
    expect(s.code).toBe(2);
    expect(s.err).toMatch(/^crucible: run demo-s7-00000000 does not exist at /);
  });

  it('status with a server that does not answer (frozen): one line saying what it could not reach, status 2', async () => {
    const frozen = await startTestNats(1);
    const pid = frozen.cluster.nodes[0]!.pid;
    process.kill(pid, 'SIGSTOP');
    try {
      const s = await cli(['status', '--log', frozen.urls[0]!, '--run', 'demo-s7-00000000']);
      expect(s.err).toBe(`crucible: could not reach the log at ${frozen.urls[0]} (no answer within ${STATUS_OPEN_MS} ms)\n`);
      expect(s.code).toBe(2);
    } finally {
      process.kill(pid, 'SIGCONT');
      await frozen.stop();
    }
  }, 60_000);

  it('shares for a role that does not split, or more shares than the Judge splits in', async () => {
    const notJudge = await cli(['worker', '--role', 'executor', '--shares', '2', '--log', nats.urls[0]!, '--run', 'x']);
    expect(notJudge.code).toBe(2);
    expect(notJudge.err).toBe('crucible: --shares: only the judge splits in shares, not the executor\n');
    const tooMany = await cli(['worker', '--role', 'judge', '--shares', '17', '--log', nats.urls[0]!, '--run', 'x']);
    expect(tooMany.code).toBe(2);
    expect(tooMany.err).toBe('crucible: --shares 17: at most 16\n');
    const spec = await cli(['run', 'configs/demo.yaml', '--log', nats.urls[0]!, '--workers', 'judge=17']);
    expect(spec.code).toBe(2);
    expect(spec.err).toBe('crucible: --workers "judge=17": judge=17: the Judge splits in at most 16 shares\n');
  });

  it('a wrong role', async () => {
    const r = await cli(['worker', '--role', 'referee', '--log', nats.urls[0]!, '--run', 'x']);
    expect(r.code).toBe(2);
    expect(r.err).toBe('crucible: --role referee: expected one of conductor, solver, adversary, executor, judge, learner\n');
  });

  it('a server it cannot reach', async () => {
    const port = await freePort();
    const r = await cli(['worker', '--role', 'executor', '--log', `nats://127.0.0.1:${port}`, '--run', 'x']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(new RegExp(`^crucible: .*127\\.0\\.0\\.1:${port}.*is nats-server running\\?`));
  }, 30_000);

  it('a log that is not JetStream', async () => {
    const r = await cli(['worker', '--role', 'judge', '--log', 'runs/x/log.db', '--run', 'x']);
    expect(r.code).toBe(2);
    expect(r.err).toBe('crucible: --log runs/x/log.db: workers share a JetStream log: expected nats://host:port\n');
  });

  it('run --workers without a JetStream log, or with a bad spec', async () => {
    const noLog = await cli(['run', 'configs/demo.yaml', '--workers', 'executor=2']);
    expect(noLog.code).toBe(2);
    expect(noLog.err).toBe('crucible: --workers: worker processes share a JetStream log; add --log nats://host:port\n');
    const bad = await cli(['run', 'configs/demo.yaml', '--log', nats.urls[0]!, '--workers', 'executor=2,referee=1']);
    expect(bad.code).toBe(2);
    expect(bad.err).toBe(
      'crucible: --workers "executor=2,referee=1": unknown role "referee" (roles: conductor, solver, adversary, executor, judge, learner)\n',
    );
    const zero = await cli(['run', 'configs/demo.yaml', '--log', nats.urls[0]!, '--workers', 'judge=0']);
    expect(zero.code).toBe(2);
    expect(zero.err).toBe('crucible: --workers "judge=0": judge=0: every role needs 1 to 64 processes\n');
  });
});

/** A supervisor of one judge worker of a run that does not exist, its log in `dir`. */
function judgeSupervisor(dir: string, opts: Partial<ConstructorParameters<typeof WorkerSupervisor>[0]>): WorkerSupervisor {
  return new WorkerSupervisor({
    location: nats.urls[0]!,
    runId: 'demo-s7-00000000',
    counts: { conductor: 0, solver: 0, adversary: 0, executor: 0, judge: 1, learner: 0 },
    logFile: path.join(dir, 'workers.log'),
    ...opts,
  });
}

describe("the run command's supervisor", () => {
  it('starts a worker that died again, and gives the run up when one keeps dying', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-supervisor-'));
    const said: string[] = [];
    const sup = judgeSupervisor(dir, {
      maxRestarts: 1,
      say: (l) => said.push(l),
    });
    try {
      sup.start();
      await expect(sup.failed()).rejects.toThrow(`the judge worker exited with status 2 2 times; see ${path.join(dir, 'workers.log')}`);
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(/^judge worker \(pid \d+\) exited with status 2: starting another$/);
      await sup.stop();
      // The worker's own line, in the workers' log, each line stamped with its time.
      const lines = readFileSync(path.join(dir, 'workers.log'), 'utf8').trimEnd().split('\n');
      expect(lines.filter((l) => l.includes('crucible: run demo-s7-00000000 does not exist at'))).toHaveLength(2);
      for (const l of lines) expect(l).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S/);
    } finally {
      await sup.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('the supervisor and a worker whose log changed under it', () => {
  it('starts another at once, which reads the log again, and counts it apart from failures', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-supervisor-'));
    const said: string[] = [];
    let launched = 0;
    const sup = judgeSupervisor(dir, {
      maxRestarts: 1,
      say: (l) => said.push(l),
      // Stands in for the worker's command: twice a worker that met LogRewrittenError (its exit
      // status), then one that ends as at RunCompleted.
      launch: (_w, command, _args, options) => spawn(command, ['-e', `process.exit(${++launched <= 2 ? EXIT_READ_AGAIN : 0})`], options),
    });
    try {
      sup.start();
      await until('the third worker has ended', 30_000, async () => launched === 3 && sup.children.length === 0);
      expect(said).toHaveLength(2);
      for (const l of said) expect(l).toMatch(/^judge worker \(pid \d+\) read messages the log no longer holds: another reads the log again$/);
      // Two such exits with one restart allowed: the run is not given up.
      const failed = await Promise.race([
        sup.failed().then(
          () => 'failed',
          () => 'failed',
        ),
        new Promise((r) => setTimeout(() => r('going on'), 500)),
      ]);
      expect(failed).toBe('going on');
    } finally {
      await sup.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('a LogRewrittenError ends the command with that exit status and its message', async () => {
    const { userFacing } = await import('../../src/cli/errors.js');
    const known = userFacing(new LogRewrittenError(5 * 65_536, 'r/judge/a', 'r/judge/b'));
    expect(known?.exitCode).toBe(EXIT_READ_AGAIN);
    expect(known?.message).toBe(
      'the log changed under this reader at position 327680: it read commit "r/judge/a" there, and the log now holds commit "r/judge/b" (a server that failed over showed messages it then dropped); read it again from the start',
    );
    // A message the head says the log holds, gone: the same recovery.
    expect(userFacing(new MissingLogMessageError('S', 86, 86))?.exitCode).toBe(EXIT_READ_AGAIN);
  });

  it('gives the run up when a worker keeps finding its log changed', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-supervisor-'));
    const sup = judgeSupervisor(dir, {
      maxRereads: 2,
      launch: (_w, command, _args, options) => spawn(command, ['-e', `process.exit(${EXIT_READ_AGAIN})`], options),
    });
    try {
      sup.start();
      await expect(sup.failed()).rejects.toThrow(`the judge worker found its log changed under it 3 times; see ${path.join(dir, 'workers.log')}`);
    } finally {
      await sup.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('a worker given credentials of another role (a cluster with auth)', () => {
  let dir: string;
  let cluster: NatsCluster;
  let runId: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-worker-creds-'));
    cluster = await natsUp({ nodes: 1, dir: path.join(dir, 'nats'), auth: true });
    const outcome = await runExperiment({
      config: twoProblemConfig(path.join(dir, 'runs'), { rounds: 1 }),
      cacheDir: catalogCache(),
      log: cluster.urls[0]!,
      credsFile: credentialsFile(path.join(dir, 'nats'), 'admin'),
    });
    expect(outcome.finished).toBe(true);
    runId = outcome.runId;
  }, 180_000);
  afterAll(async () => {
    await natsDown(path.join(dir, 'nats')).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const worker = (role: string, creds: string) => cli(['worker', '--role', role, '--log', cluster.urls[0]!, '--run', runId, '--creds', creds]);

  it("the judge's file for an executor: one line naming the file and the file it needs, status 2 (it exited 0 on a finished run)", async () => {
    const judgeFile = credentialsFile(path.join(dir, 'nats'), 'judge');
    const r = await worker('executor', judgeFile);
    expect(r.err).toBe(
      `crucible: --creds ${judgeFile}: credentials of role judge, not executor: a executor worker needs executor.creds.json (or admin.creds.json) from \`crucible nats up\`\n`,
    );
    expect(r.code).toBe(2);
  }, 60_000);

  it("a file that says executor and holds the judge's key: the server's refusal, one line, status 2", async () => {
    const forged = path.join(dir, 'forged.creds.json');
    writeCredentials(forged, { ...readCredentials(credentialsFile(path.join(dir, 'nats'), 'judge')), role: 'executor' });
    const r = await worker('executor', forged);
    expect(r.err).toMatch(
      new RegExp(
        `^crucible: the event log at ${cluster.urls[0]} refused the connection: it does not let these credentials read the replies of role executor \\(Permissions Violation for Subscription to "_INBOX_executor\\.\\S+"\\): the key in them is not the executor's\n$`,
      ),
    );
    expect(r.code).toBe(2);
    // Saying admin, the role that may do everything, gets no further.
    writeCredentials(forged, { ...readCredentials(credentialsFile(path.join(dir, 'nats'), 'judge')), role: 'admin' });
    const asAdmin = await worker('executor', forged);
    expect(asAdmin.err).toMatch(
      new RegExp(
        `^crucible: the event log at ${cluster.urls[0]} refused the connection: it does not let these credentials read the replies of role admin \\(Permissions Violation for Subscription to "_INBOX\\.\\S+"\\): the key in them is not the admin's\n$`,
      ),
    );
    expect(asAdmin.code).toBe(2);
  }, 60_000);

  it("the executor's own file passes the check: the worker finds the run complete and exits 0", async () => {
    const r = await worker('executor', credentialsFile(path.join(dir, 'nats'), 'executor'));
    expect(r.err).toMatch(/run complete/);
    expect(r.code).toBe(0);
  }, 120_000);
});
