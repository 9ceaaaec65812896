/**
 * Executions per second of the demo's first round with its actors as worker processes over
 * JetStream on loopback (1 and 2 executor processes, every other role one process), beside the
 * in-process run of the same config on the same kind of server (the baseline, measured in this
 * run at the same settings), and the log's round trip per program: publish the task, claim it,
 * append its ProgramExecuted, ack.
 *
 * Executions/s counts the pairs the sandbox ran (not those answered from recorded verdicts) over
 * the execution phase: from the round's first ExecutionRequested to its last ProgramExecuted, by
 * the events' `at` (so process start-up is not counted; round seconds include it).
 *
 *   npm run bench -- workers [--problems 12] [--round-trips 200]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfigFile } from '../src/config/load.js';
import type { RunConfig } from '../src/config/schema.js';
import { runExperiment, type RunOutcome } from '../src/actors/run.js';
import { openRunLog } from '../src/events/open-log.js';
import { openJetStreamLog } from '../src/events/jetstream-log.js';
import type { EventEnvelope } from '../src/events/envelope.js';
import { allPairResults } from '../src/projections/recorded-verdicts.js';
import { natsDown, natsUp } from '../src/events/nats-server.js';
import { JetStreamTaskQueue } from '../src/events/jetstream-tasks.js';
import { runWithWorkers } from '../src/workers/run-workers.js';
import { parseWorkerCounts } from '../src/workers/roles.js';
import { flag } from './flags.js';


interface Figures {
  label: string;
  pairs: number;
  programs: number;
  phaseSeconds: number;
  roundSeconds: number;
}

async function figuresOf(label: string, location: string, outcome: RunOutcome): Promise<Figures> {
  const log = await openRunLog(location, outcome.runId, { create: false });
  const events: EventEnvelope[] = [];
  try {
    for await (const e of log.read({}, { runId: outcome.runId, types: ['ExecutionRequested', 'ProgramExecuted'] })) events.push(e);
  } finally {
    await log.close();
  }
  const first = Math.min(...events.filter((e) => e.type === 'ExecutionRequested').map((e) => Date.parse(e.at)));
  const last = Math.max(...events.filter((e) => e.type === 'ProgramExecuted').map((e) => Date.parse(e.at)));
  const pairs = allPairResults(events).filter((r) => !r.cached).length;
  return { label, pairs, programs: events.filter((e) => e.type === 'ProgramExecuted').length, phaseSeconds: (last - first) / 1000, roundSeconds: outcome.rows[0]?.seconds ?? Number.NaN };
}

/** A fresh single-node server for each run (each run's streams to itself). */
async function onFreshServer<T>(root: string, name: string, f: (url: string) => Promise<T>): Promise<T> {
  const dir = path.join(root, `nats-${name}`);
  const cluster = await natsUp({ nodes: 1, dir });
  try {
    return await f(cluster.urls[0]!);
  } finally {
    await natsDown(dir).catch(() => undefined);
  }
}

/** Publish, claim, append a ProgramExecuted-sized commit, ack: the log's part of one program. */
async function roundTrip(url: string, n: number): Promise<number> {
  const log = await openJetStreamLog({ servers: url, stream: 'BENCH_RT', subjectPrefix: 'bench.rt' });
  try {
    const queue = await JetStreamTaskQueue.open(log, { name: 'programs' });
    const data = { queue: 'q', commitId: 'c', deliveries: 1, reason: 'x'.repeat(400) };
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      await queue.publish(`rt/${i}`, JSON.stringify({ requestId: 'r', programHash: String(i) }));
      const [task] = await queue.claim(1, 1000);
      await log.append('executor', [{ type: 'WorkAbandoned', runId: 'bench', data }], { commitId: `rt/${i}` });
      await task!.ack();
    }
    return (performance.now() - t0) / n;
  } finally {
    await log.close();
  }
}

export async function runBench(args: string[]): Promise<void> {
  const problems = flag(args, 'problems', 12);
  const trips = flag(args, 'round-trips', 200);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-workers-'));
  try {
    const config: RunConfig = loadConfigFile('configs/demo.yaml', {
      overrides: ['rounds=1', `dataset.limit=${problems}`, `sampling.problemsPerRound=${problems}`, `dir=${root}`],
    });
    const cacheDir = path.join(os.tmpdir(), 'crucible-bench-catalog');
    console.log(`workers: the demo's first round, ${problems} problems, ${os.availableParallelism()} cores; one nats-server on loopback per run`);
    const rows: Figures[] = [];
    rows.push(
      await onFreshServer(root, 'in-process', async (url) =>
        figuresOf('in-process (baseline)', url, await runExperiment({ config, dir: path.join(root, 'in-process'), log: url, cacheDir })),
      ),
    );
    for (const executors of [1, 2]) {
      rows.push(
        await onFreshServer(root, `workers-${executors}`, async (url) => {
          const started = performance.now();
          const outcome = await runWithWorkers({ config, dir: path.join(root, `workers-${executors}`), location: url, counts: parseWorkerCounts(`executor=${executors}`), cacheDir });
          if (!outcome.finished) throw new Error(`the run with ${executors} executor processes did not finish`);
          const f = await figuresOf(`${executors} executor process${executors > 1 ? 'es' : ''} (+5 roles)`, url, outcome);
          console.log(`  ${f.label}: whole command ${((performance.now() - started) / 1000).toFixed(1)} s (process start-up included)`);
          return f;
        }),
      );
    }
    const base = rows[0]!;
    const rate = (f: Figures) => f.pairs / f.phaseSeconds;
    console.log('');
    console.log(['run'.padEnd(30), 'pairs run'.padStart(10), 'programs'.padStart(9), 'exec phase s'.padStart(13), 'round s'.padStart(8), 'pairs/s'.padStart(8), 'vs baseline'.padStart(12)].join(''));
    for (const f of rows) {
      console.log(
        [f.label.padEnd(30), String(f.pairs).padStart(10), String(f.programs).padStart(9), f.phaseSeconds.toFixed(1).padStart(13), f.roundSeconds.toFixed(1).padStart(8), rate(f).toFixed(1).padStart(8), `${(rate(f) / rate(base)).toFixed(2)}x`.padStart(12)].join(''),
      );
    }
    const perProgram = await onFreshServer(root, 'round-trip', (url) => roundTrip(url, trips));
    const pairsPerProgram = rows[1]!.pairs / Math.max(1, rows[1]!.programs);
    console.log('');
    console.log(`log round trip per program (publish task, claim, append ProgramExecuted, ack; ${trips} in a row): ${perProgram.toFixed(2)} ms`);
    console.log(`  = ${(perProgram / pairsPerProgram).toFixed(3)} ms per (program, test) at the round's ${pairsPerProgram.toFixed(1)} pairs per program; the sandbox spends ${((1000 * base.phaseSeconds) / base.pairs).toFixed(2)} ms of wall time per pair in-process`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
