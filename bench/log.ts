/**
 * Event log benchmark: append throughput (one event per commit, batched commits), raw
 * better-sqlite3 inserts into the same table as the baseline of the same run, and a full replay
 * into the trivial event-count projection and into the run's real read models (RUN_PROJECTIONS:
 * the executions table takes a row per compact ProgramExecuted, its 8 verdicts packed, as in a run); then the same events on SQLite and
 * JetStream (./log-backends.ts).
 * `node bin/crucible.js bench log [--events N] [--batch B] [--backend-events N] [--nats 1|3|1,3|none]`.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { UserError } from '../src/cli/errors.js';
import { makeEvent, requestBody } from '../src/events/catalog.js';
import { eventIdPrefix, type NewEvent } from '../src/events/envelope.js';
import { ORIGIN, type Position } from '../src/events/log.js';
import { runBackendsBench } from './log-backends.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { eventCounts } from '../src/projections/event-counts.js';
import { ProjectionRunner } from '../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../src/projections/run-views.js';
import { useWal } from '../src/core/sqlite-wal.js';

interface Args {
  events: number;
  batch: number;
  /** Events in the backends section (SQLite, JetStream), which runs a nats-server per size. */
  backendEvents: number;
  /** nats-server sizes to measure: 1, 3, or none. */
  nodes: (1 | 3)[];
}

const USAGE = 'known: --events N, --batch B, --backend-events N, --nats 1|3|1,3|none';

function parseArgs(args: string[]): Args {
  const out: Args = { events: 200_000, batch: 100, backendEvents: 20_000, nodes: [1, 3] };
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]!;
    const raw = args[i + 1] ?? '';
    i++;
    if (flag === '--nats') {
      if (raw === 'none') out.nodes = [];
      else {
        const sizes = raw.split(',');
        if (!sizes.every((s) => s === '1' || s === '3')) throw new UserError(`bench log: --nats takes 1, 3, 1,3 or none, got "${raw}"`);
        out.nodes = sizes.map((s) => Number(s) as 1 | 3);
      }
      continue;
    }
    const value = Number(raw);
    if (flag !== '--events' && flag !== '--batch' && flag !== '--backend-events') throw new UserError(`bench log: unknown argument "${flag}" (${USAGE})`);
    if (!Number.isInteger(value) || value < 1) throw new UserError(`bench log: ${flag} needs a positive integer, got "${raw}"`);
    if (flag === '--events') out.events = value;
    else if (flag === '--batch') out.batch = value;
    else out.backendEvents = value;
  }
  return out;
}

const hex = (s: string) => createHash('sha256').update(s).digest('hex');

/** A realistic mix in units of ten events: a sample, an execution request of 64 pairs (8
 * programs x 8 tests), and the 8 compact ProgramExecuted events answering it. */
function eventAt(i: number): NewEvent {
  const unit = Math.floor(i / 10);
  const k = i % 10;
  if (k === 0) {
    return makeEvent('SolutionSampled', 'bench', {
      round: i % 7,
      problemId: `p${i % 50}`,
      solutionId: `s${i}`,
      programHash: hex(`prog${i % 1000}`),
      policy: { role: 'code', name: 'toy', version: 3 },
      sampling: { seed: i, index: i % 8, temperature: 0.8, candidateId: null },
      responseHash: null,
    });
  }
  const requestId = `${unit % 7}/p${unit % 50}/q${unit}`;
  if (k === 1) {
    const pairs = Array.from({ length: 64 }, (_, j) => ({
      programId: `s${j >> 3}`,
      programHash: hex(`prog${(unit * 8 + (j >> 3)) % 1000}`),
      testId: `t${j & 7}`,
      testHash: hex(`test${j & 7}`),
    }));
    return makeEvent('ExecutionRequested', 'bench', { round: unit % 7, problemId: `p${unit % 50}`, requestId, purpose: 'reward', ...requestBody(pairs) });
  }
  const program = k - 2;
  return makeEvent('ProgramExecuted', 'bench', {
    requestId,
    programHash: hex(`prog${(unit * 8 + program) % 1000}`),
    pairs: Array.from({ length: 8 }, (_, j) => program * 8 + j),
    verdicts: Array.from({ length: 8 }, (_, j) => ((i + j) % 3 ? 'A' : 'W')).join(''),
    timeMs: Array.from({ length: 8 }, (_, j) => 3.5 + j),
    memoryKb: Array.from({ length: 8 }, () => 9000),
    outputs: {},
    exceptions: {},
    cached: [],
    isolated: true,
    load: 'ran',
  });
}

const rate = (n: number, ms: number) => Math.round((n / ms) * 1000);
const fmt = (n: number) => n.toLocaleString('en-US');
let lastCpuMs = 0;
// The CPU-time rate is printed too: on a shared 2-core machine wall time also measures the neighbours.
const line = (label: string, n: number, ms: number) =>
  console.log(
    `${label.padEnd(52)} ${fmt(rate(n, ms)).padStart(10)} events/s  (${fmt(n)} in ${ms.toFixed(0)} ms; ` + `${fmt(rate(n, lastCpuMs))} events per CPU-second)`,
  );

async function time(fn: () => Promise<void> | void): Promise<number> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  lastCpuMs = (c.user + c.system) / 1000;
  return ms;
}

export async function runBench(argv: string[]): Promise<void> {
  const { events: n, batch, backendEvents, nodes } = parseArgs(argv);
  const single = Math.max(1, Math.min(n, Math.floor(n / 10)));
  const dir = mkdtempSync(join(tmpdir(), 'crucible-bench-log-'));
  try {
    console.log(`crucible bench log: ${fmt(n)} events, ${batch} per batched commit, WAL, synchronous FULL unless noted`);
    const events = Array.from({ length: n }, (_, i) => eventAt(i));

    // 1. One event per commit.
    const l1 = await openSqliteLog(join(dir, 'single.db'));
    const tSingle = await time(async () => {
      for (let i = 0; i < single; i++) await l1.append(`s/${i % 8}`, [events[i]!], { commitId: `c${i}` });
    });
    await l1.close();
    line('append, 1 event/commit', single, tSingle);
    const l1n = await openSqliteLog(join(dir, 'single-normal.db'), { synchronous: 'normal' });
    const tSingleNormal = await time(async () => {
      for (let i = 0; i < single; i++) await l1n.append(`s/${i % 8}`, [events[i]!], { commitId: `c${i}` });
    });
    await l1n.close();
    line('append, 1 event/commit, synchronous NORMAL', single, tSingleNormal);

    // 2. Batched commits, with the concurrency check on.
    const appendBatched = async (file: string, synchronous: 'full' | 'normal') => {
      const log = await openSqliteLog(join(dir, file), { synchronous });
      const heads = new Map<string, Position>();
      const ms = await time(async () => {
        for (let c = 0; c * batch < n; c++) {
          const stream = `s/${c % 8}`;
          const r = await log.append(stream, events.slice(c * batch, (c + 1) * batch), {
            commitId: `b${c}`,
            expectedPosition: heads.get(stream) ?? ORIGIN,
          });
          heads.set(stream, r.positions[r.positions.length - 1]!);
        }
      });
      return { log, ms };
    };
    const { log: batched, ms: tBatched } = await appendBatched('batched.db', 'full');
    line(`append, ${batch} events/commit`, n, tBatched);
    const normal = await appendBatched('batched-normal.db', 'normal');
    await normal.log.close();
    line(`append, ${batch} events/commit, synchronous NORMAL`, n, normal.ms);

    // 3. Baseline: raw prepared inserts into the same schema, one transaction.
    const rawLog = await openSqliteLog(join(dir, 'raw.db'));
    await rawLog.close();
    const raw = new Database(join(dir, 'raw.db'));
    useWal(raw);
    raw.pragma('synchronous = FULL');
    const ins = raw.prepare(
      'INSERT INTO events (position, id, commit_id, stream, type, v, run_id, causation_id, correlation_id, at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const at = new Date().toISOString();
    const tRaw = await time(() => {
      raw.transaction(() => {
        // Same ids as the log derives (one prefix per commit), so the index work is the same.
        let prefix = '';
        for (let i = 0; i < n; i++) {
          const e = events[i]!;
          if (i % batch === 0) prefix = eventIdPrefix(`b${i / batch}`);
          ins.run(i + 1, `${prefix}-${i % batch}`, `b${Math.floor(i / batch)}`, `s/${i % 8}`, e.type, 1, e.runId, null, null, at, JSON.stringify(e.data));
        }
      })();
    });
    line('baseline: raw prepared inserts, 1 transaction', n, tRaw);
    // The same raw inserts, one transaction per `batch` rows: the fsync count of the log's commits.
    raw.exec('DELETE FROM events');
    const tRawBatched = await time(() => {
      let prefix = '';
      const commit = raw.transaction((from: number) => {
        for (let i = from; i < Math.min(n, from + batch); i++) {
          const e = events[i]!;
          ins.run(i + 1, `${prefix}-${i % batch}`, `b${Math.floor(i / batch)}`, `s/${i % 8}`, e.type, 1, e.runId, null, null, at, JSON.stringify(e.data));
        }
      });
      for (let from = 0; from < n; from += batch) {
        prefix = eventIdPrefix(`b${from / batch}`);
        commit(from);
      }
    });
    raw.close();
    line(`baseline: raw prepared inserts, ${batch} per transaction (same fsyncs as the log)`, n, tRawBatched);
    console.log(`  batched append / raw inserts with the same commits: ${(tBatched / tRawBatched).toFixed(2)}x the time at FULL`);
    console.log(
      `  batched append / raw inserts: ${(tBatched / tRaw).toFixed(2)}x the time at FULL, ` +
        `${(normal.ms / tRaw).toFixed(2)}x at NORMAL (goal <= 2x; at FULL each of the ` +
        `${Math.ceil(n / batch)} commits waits for an fsync, the baseline's one transaction for one)`,
    );

    // 4. Replay: raw read baseline, then the log into a projection.
    const rawRead = new Database(join(dir, 'batched.db'), { readonly: true });
    let parsed = 0;
    const tRawRead = await time(() => {
      for (const row of rawRead.prepare('SELECT data FROM events ORDER BY position').iterate() as Iterable<{ data: string }>) {
        if (JSON.parse(row.data)) parsed++;
      }
    });
    line('baseline: raw SELECT + JSON.parse', parsed, tRawRead);
    // The same with every column a stored event has (what a log read must hand out).
    let parsedAll = 0;
    const tRawAll = await time(() => {
      for (const row of rawRead.prepare('SELECT * FROM events ORDER BY position').raw().iterate() as Iterable<unknown[]>) {
        if (JSON.parse(row[10] as string)) parsedAll++;
      }
    });
    rawRead.close();
    line('baseline: raw SELECT of every column + JSON.parse', parsedAll, tRawAll);
    let readCount = 0;
    const tRead = await time(async () => {
      for await (const _ of batched.read()) readCount++;
    });
    line('log.read (checked rows trusted, others validated)', readCount, tRead);
    let pageCount = 0;
    const tPages = await time(async () => {
      for await (const page of batched.readPages()) pageCount += page.length;
    });
    line('log.readPages (pages, as replays read)', pageCount, tPages);
    console.log(
      `  readPages / raw SELECT + JSON.parse: ${(tRawRead / tPages).toFixed(2)}x the rate; / every column: ${(tRawAll / tPages).toFixed(2)}x (goal >= 0.8x)`,
    );
    let runner: ProjectionRunner | undefined;
    const tReplay = await time(async () => {
      runner = await ProjectionRunner.replayInto(join(dir, 'rm.db'), { log: batched, projections: [eventCounts] });
    });
    line('replay into projection (event-counts)', n, tReplay);
    console.log(`  replay goal >= 100,000 events/s: ${rate(n, tReplay) >= 100_000 ? 'met' : 'MISSED'} (wall)`);
    await runner!.close();
    // The run's read models: each ProgramExecuted becomes one row of the executions table.
    let runViews: ProjectionRunner | undefined;
    const tRunViews = await time(async () => {
      runViews = await ProjectionRunner.replayInto(join(dir, 'views.db'), { log: batched, projections: RUN_PROJECTIONS });
    });
    line(`replay into the run's read models (${RUN_PROJECTIONS.length} projections)`, n, tRunViews);
    console.log(`  run read models / event-counts: ${(tRunViews / tReplay).toFixed(2)}x the time`);
    await runViews!.close();
    await batched.close();

    const backendSet = Array.from({ length: backendEvents }, (_, i) => eventAt(i));
    await runBackendsBench(backendSet, { singles: Math.max(1, Math.floor(backendEvents / 10)), batch, nodes });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
