/**
 * The demo as separate worker processes over JetStream: real nats-servers, real `crucible worker`
 * child processes, SIGKILL. Each run is compared with the in-process run of the same config and
 * seed (SQLite log): the same round table, the same commits of every singleton role, and every
 * (program, test) pair of every request executed exactly once.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExperiment, LOG_FILE } from '../../src/actors/run.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { runWithWorkers } from '../../src/workers/run-workers.js';
import type { WorkerChild } from '../../src/workers/supervisor.js';
import { openRunLog } from '../../src/events/open-log.js';
import type { JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { JetStreamTaskQueue, taskQueueConsumer, taskStreamOf } from '../../src/events/jetstream/jetstream-tasks.js';
import { parseWorkerCounts } from '../../src/workers/roles.js';
import { runStatus, type RunStatus } from '../../src/workers/status.js';
import type { RunConfig } from '../../src/config/schema.js';
import { smallConfig } from '../support/small-config.js';
import { startTestNats, type TestNats } from '../support/nats.js';
import { runCli } from '../support/cli.js';
import { runEvents } from '../support/run-log.js';
import { until } from '../support/until.js';
import { executionFacts, singletonCommits } from '../support/run-facts.js';
import { catalogCache } from '../support/catalog-cache.js';

/** Short leases, beats and ack deadlines, so that takeovers happen within a test. */
const WORKER_ARGS = ['--heartbeat-ms', '200', '--lease-ms', '2000', '--ack-wait-ms', '4000'];

let root: string;
let config: RunConfig;
let reference: { rows: RoundRow[]; commits: string[] };

/** The table without wall times. Exact: the round table sums the Judge's per-problem outputs in
 * the round's schedule order, whatever order the executors finished them in. */
const figures = (rows: readonly RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

const eventsOf = runEvents;

interface WorkersRun {
  nats: TestNats;
  location: string;
  runId: string;
  rows: RoundRow[];
  said: string[];
  workersLog: string;
}

/** Whether the snapshot file holds a snapshot of the actor (false while the file is not there yet). */
function hasSnapshot(file: string, actor: string): boolean {
  if (!existsSync(file)) return false;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return (
      db.prepare("SELECT 1 FROM sqlite_schema WHERE name = 'actor_snapshots'").get() !== undefined &&
      db.prepare('SELECT 1 FROM actor_snapshots WHERE actor = ?').get(actor) !== undefined
    );
  } finally {
    db.close();
  }
}

async function workersRun(
  name: string,
  spec: string,
  during?: (location: string, runId: string) => Promise<void>,
  extraArgs: string[] = [],
): Promise<WorkersRun> {
  const nats = await startTestNats(1);
  const location = nats.urls[0]!;
  const said: string[] = [];
  let watcher: Promise<void> = Promise.resolve();
  try {
    const outcome = await runWithWorkers({
      config,
      dir: path.join(root, name),
      cacheDir: catalogCache(),
      location,
      counts: parseWorkerCounts(spec),
      workerArgs: [...WORKER_ARGS, ...extraArgs],
      say: (line) => said.push(line),
      onStarted: () => {
        if (during) watcher = during(location, runIdOf());
      },
    });
    await watcher;
    expect(outcome.finished).toBe(true);
    return { nats, location, runId: outcome.runId, rows: outcome.rows, said, workersLog: readFileSync(path.join(root, name, 'workers.log'), 'utf8') };
  } catch (err) {
    await nats.stop();
    throw err;
  }
}

let refRunId = '';
const runIdOf = () => refRunId;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-workers-'));
  config = smallConfig(root, { rounds: 2 });
  const inProcess = await runExperiment({ config, dir: path.join(root, 'in-process'), cacheDir: catalogCache() });
  expect(inProcess.finished).toBe(true);
  refRunId = inProcess.runId;
  const events = await eventsOf(path.join(inProcess.dir, LOG_FILE), inProcess.runId);
  reference = { rows: inProcess.rows, commits: singletonCommits(events) };
}, 300_000);

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

const natsToStop: TestNats[] = [];
afterAll(async () => {
  for (const n of natsToStop) await n.stop();
});

describe('a run as worker processes', () => {
  it('with two executors gives the in-process round table; the two executors write each program once; every pair once', async () => {
    const run = await workersRun('two-executors', 'executor=2');
    natsToStop.push(run.nats);
    expect(figures(run.rows)).toEqual(figures(reference.rows));
    expect(run.rows.map((r) => r.round)).toEqual([1, 2]);
    const events = await eventsOf(run.location, run.runId);
    expect(singletonCommits(events)).toEqual(reference.commits);
    const facts = executionFacts(events);
    expect(facts.problems).toEqual([]);
    // Both executor processes ran on the shared queue and between them wrote each program once.
    // How the programs split is timing (on a loaded machine the first one up may take them all);
    // the queue's hand-over of unacked work is tested in fence.test.ts and by the SIGKILL test.
    const written = [...run.workersLog.matchAll(/crucible worker executor \(pid \d+\): run complete; (\d+) commits written/g)].map((m) => Number(m[1]));
    expect(written).toHaveLength(2);
    expect(written.reduce((a, b) => a + b, 0)).toBe(facts.programs);
    expect(run.said).toEqual([]);

    // `crucible status`: the run, the queue, the leases (all released) and every worker's last beat.
    const status = await runCli(['status', '--log', run.location, '--run', run.runId, '--all']);
    expect(status.code).toBe(0);
    const lines = status.out.split('\n');
    expect(lines[0]).toMatch(new RegExp(`^run ${run.runId}: complete; log head \\d+$`));
    expect(lines[1]).toBe('queues (waiting/claimed): programs 0/0, solutions 0/0, suites 0/0');
    expect(lines[2]).toBe('leases: conductor -, judge -, learner -');
    expect(lines[4]).toMatch(/^\s*role\s+state\s+pid\s+host\s+lag\s+running\s+pending\s+commits\s+beat$/);
    const rows = lines
      .slice(6)
      .filter((l) => l.trim().length > 0)
      .map((l) => l.trim().split(/\s+/));
    expect(rows.map((r) => r[0])).toEqual(['conductor', 'solver', 'adversary', 'executor', 'executor', 'judge', 'learner']);
    // Every worker stopped at RunCompleted, having folded the whole log (lag 0).
    for (const r of rows) {
      expect(['stopping', 'gone']).toContain(r[1]);
      expect(r[4]).toBe('0');
    }
  }, 300_000);

  it('with two solvers and two adversaries gives the in-process table and commits; sampling from their shared queues, each sample recorded once; forged tasks left in their queues', async () => {
    // Tasks this code did not write, put on each shared queue once the workers have opened it:
    // each is left in its queue with a line naming it, and the run goes on (tasks come from the log).
    const forged = ['not json', '{"key":1}', '[]'];
    const forge = async (location: string, runId: string) => {
      const log = (await openRunLog(location, runId, { create: false })) as JetStreamEventLog;
      try {
        for (const name of ['programs', 'solutions', 'suites']) {
          await until(`the ${name} queue`, 60_000, () => log.jsm.consumers.info(taskStreamOf(log, name), taskQueueConsumer(name)));
          const queue = await JetStreamTaskQueue.open(log, { name, ackWaitMs: 4000 });
          for (const [i, body] of forged.entries()) await queue.publish(`forged-${name}-${i}`, body);
        }
      } finally {
        await log.close();
      }
    };
    const run = await workersRun('two-samplers', 'solver=2,adversary=2', forge);
    for (const [name, shape] of [
      ['programs', '{requestId, programHash}'],
      ['solutions', '{key, at}'],
      ['suites', '{key, at}'],
    ] as const) {
      for (const i of forged.keys())
        expect(run.workersLog).toContain(
          `left task forged-${name}-${i} in queue ${name}: its body is not ${shape}; not acked, so it stays for whoever it is for`,
        );
    }
    natsToStop.push(run.nats);
    expect(figures(run.rows)).toEqual(figures(reference.rows));
    const events = await eventsOf(run.location, run.runId);
    // The same commits (ids and event types) as the in-process run, the samplers' among them:
    // what a sampling writes depends on the effect, not on which process ran it.
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);
    const inProcess = await eventsOf(path.join(root, 'in-process', LOG_FILE), refRunId);
    for (const [type, idOf] of [
      ['SolutionSampled', (d: { solutionId: string }) => d.solutionId],
      ['TestsSampled', (d: { suiteId: string }) => d.suiteId],
    ] as const) {
      const ids = events.filter((e) => e.type === type).map((e) => idOf(e.data as never));
      // Each sample once, and the same samples (programs and tests by hash) as in-process.
      expect(new Set(ids).size, `${type} recorded twice`).toBe(ids.length);
      const content = (es: typeof events) =>
        es
          .filter((e) => e.type === type)
          .map((e) => JSON.stringify(e.data))
          .sort();
      expect(content(events)).toEqual(content(inProcess));
    }
    // Both processes of each sampler role worked the role's queue; between them each commit once.
    for (const role of ['solver', 'adversary'] as const) {
      const written = [...run.workersLog.matchAll(new RegExp(`crucible worker ${role} \\(pid \\d+\\): run complete; (\\d+) commits written`, 'g'))].map((m) =>
        Number(m[1]),
      );
      expect(written, role).toHaveLength(2);
      const commits = new Set(events.filter((e) => e.stream === role).map((e) => e.commitId));
      expect(
        written.reduce((a, b) => a + b, 0),
        role,
      ).toBe(commits.size);
    }
    expect(run.said).toEqual([]);
  }, 300_000);

  it('publishes again a task lost from its queue (claimed and acked by someone who did not do the work): the in-process table, every pair once', async () => {
    // Before, the run waited forever: the work stayed open in the log and no task stood for it.
    const lost: Record<string, string> = {};
    const lose = async (location: string, runId: string) => {
      const log = (await openRunLog(location, runId, { create: false })) as JetStreamEventLog;
      try {
        for (const name of ['programs', 'suites']) {
          await until(`the ${name} queue`, 60_000, () => log.jsm.consumers.info(taskStreamOf(log, name), taskQueueConsumer(name)));
          const queue = await JetStreamTaskQueue.open(log, { name, ackWaitMs: 4000 });
          const [task] = await until(`a task of the ${name} queue`, 120_000, async () => {
            const got = await queue.claim(1, 1000);
            return got.length > 0 ? got : null;
          });
          await task!.ack();
          lost[name] = task!.body;
        }
      } finally {
        await log.close();
      }
    };
    const run = await workersRun('lost-tasks', 'executor=1', lose);
    natsToStop.push(run.nats);
    expect(Object.keys(lost).sort()).toEqual(['programs', 'suites']);
    for (const name of ['programs', 'suites']) {
      expect(run.workersLog).toMatch(
        new RegExp(`published \\d+ task\\(s\\) of queue ${name} again: their work is open in the log, but the queue held no task`),
      );
    }
    expect(figures(run.rows)).toEqual(figures(reference.rows));
    const events = await eventsOf(run.location, run.runId);
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);
    expect(run.said).toEqual([]);
  }, 300_000);

  it('survives SIGKILL of an executor running programs and of the judge mid-run (restarted from its snapshot): same table, every pair once, no commit lost or doubled', async () => {
    const killed: string[] = [];
    const run = await workersRun(
      'sigkill',
      'executor=2',
      async (location, runId) => {
        const executorBusy = await until('an executor running a program', 120_000, async () => {
          const s = await runStatus(location, runId);
          return s.workers.find((w) => w.role === 'executor' && !w.gone && w.state === 'live' && w.running > 0);
        });
        process.kill(executorBusy.pid, 'SIGKILL');
        killed.push('executor');
        // The Judge mid-run: it has judged some tests, stored a snapshot (which its replacement
        // starts from; on a loaded machine the first TestsJudged can come before it) and has
        // more to judge.
        const judge = await until('the judge after its first TestsJudged and its first snapshot', 120_000, async () => {
          const s: RunStatus = await runStatus(location, runId);
          const events = await eventsOf(location, runId);
          if (!events.some((e) => e.type === 'TestsJudged') || !hasSnapshot(path.join(root, 'sigkill', 'snapshots.db'), 'judge')) return null;
          return s.workers.find((w) => w.role === 'judge' && !w.gone && w.state === 'live');
        });
        process.kill(judge.pid, 'SIGKILL');
        killed.push('judge');
      },
      ['--snapshot-every', '20'],
    );
    natsToStop.push(run.nats);
    expect(killed).toEqual(['executor', 'judge']);
    // The supervisor started another of each.
    expect(run.said.some((l) => /^executor worker \(pid \d+\) was killed \(SIGKILL\): starting another$/.test(l))).toBe(true);
    expect(run.said.some((l) => /^judge worker \(pid \d+\) was killed \(SIGKILL\): starting another$/.test(l))).toBe(true);
    // The new judge started from the snapshot the killed one stored, not from the log's start.
    const judgeStarts = [...run.workersLog.matchAll(/crucible worker judge \(pid \d+\): (started from [^:]+): (\d+) events folded/g)].map((m) => m[1]!);
    expect(judgeStarts[0]).toBe('started from the start of the log');
    expect(judgeStarts.at(-1)).toMatch(/^started from its snapshot at position \d+$/);
    expect(figures(run.rows)).toEqual(figures(reference.rows));
    const events = await eventsOf(run.location, run.runId);
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);
  }, 300_000);

  it('with the Judge split in two shares, both judges write; once one is killed its share moves on: the in-process table and commits, every pair once', async () => {
    let before: RunStatus | null = null;
    let killedId = '';
    let killedShares: string[] = [];
    const run = await workersRun('judge-shares-2', 'judge=2', async (location, runId) => {
      before = await until('two live judges, each holding a share and each having written', 120_000, async () => {
        const s = await runStatus(location, runId);
        const judges = s.workers.filter((w) => w.role === 'judge' && !w.gone);
        const holders = new Set([s.leases['judge/s0'], s.leases['judge/s1']]);
        return judges.length === 2 && judges.every((w) => w.state === 'live' && w.done > 0) && holders.size === 2 && !holders.has(undefined) ? s : null;
      });
      const judges = before.workers.filter((w) => w.role === 'judge');
      // One share each: the two leases name the two judges.
      expect(new Set([before.leases['judge/s0'], before.leases['judge/s1']])).toEqual(new Set(judges.map((w) => w.workerId)));
      expect(before.leases.judge).toBeNull();
      const victim = judges[0]!;
      killedId = victim.workerId;
      killedShares = ['judge/s0', 'judge/s1'].filter((k) => before!.leases[k] === killedId);
      process.kill(victim.pid, 'SIGKILL');
      // Its share is taken by the other judge, or by the judge started in its place.
      await until("another judge to hold the killed one's share", 60_000, async () => {
        const s = await runStatus(location, runId);
        return killedShares.every((k) => s.leases[k] !== undefined && s.leases[k] !== killedId) ? true : null;
      });
    });
    natsToStop.push(run.nats);
    expect(before).not.toBeNull();
    expect(figures(run.rows)).toEqual(figures(reference.rows));
    const events = await eventsOf(run.location, run.runId);
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);
    // The Judge's commits went to the shares' streams, none to the single Judge's.
    const judgeStreams = new Set(events.filter((e) => e.type === 'ProblemEvaluated').map((e) => e.stream));
    expect([...judgeStreams].sort()).toEqual(['judge/s0', 'judge/s1']);
    expect(run.said.some((l) => /^judge worker \(pid \d+\) was killed \(SIGKILL\): starting another$/.test(l))).toBe(true);
    expect(run.workersLog).toMatch(/crucible worker judge \(pid \d+\): holds judge shares \d of 2: live/);
  }, 300_000);

  it('with the Judge split in three shares gives the in-process table and commits', async () => {
    const run = await workersRun('judge-shares-3', 'judge=3');
    natsToStop.push(run.nats);
    expect(figures(run.rows)).toEqual(figures(reference.rows));
    const events = await eventsOf(run.location, run.runId);
    expect(singletonCommits(events)).toEqual(reference.commits);
    expect(executionFacts(events).problems).toEqual([]);
    expect(events.some((e) => e.stream === 'judge')).toBe(false);
  }, 300_000);

  it('stops its workers when its caller gives up on it (an aborted signal): the run rejects with the reason, every worker exits, none is started again', async () => {
    const nats = await startTestNats(1);
    natsToStop.push(nats);
    const controller = new AbortController();
    const said: string[] = [];
    let children: () => WorkerChild[] = () => [];
    const run = runWithWorkers({
      config,
      dir: path.join(root, 'given-up'),
      cacheDir: catalogCache(),
      location: nats.urls[0]!,
      counts: parseWorkerCounts('executor=1'),
      workerArgs: WORKER_ARGS,
      say: (line) => said.push(line),
      signal: controller.signal,
      onStarted: (list) => {
        children = list;
      },
    });
    const started = await until('the workers to start', 60_000, async () => (children().length === 6 ? children() : null));
    const reason = new Error('the caller gave up');
    controller.abort(reason);
    await expect(run).rejects.toBe(reason);
    for (const c of started) expect(c.process.exitCode !== null || c.process.signalCode !== null, `${c.role} exited`).toBe(true);
    // Past the supervisor's restart delay: nothing was started in place of the stopped workers.
    await new Promise((r) => setTimeout(r, 1000));
    expect(children()).toEqual([]);
    expect(said).toEqual([]);
  }, 120_000);
});
