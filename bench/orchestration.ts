/**
 * Orchestration overhead per (program, test) pair, execution time excluded: the whole actor
 * loop (sampling, judging, rewards, Mistake Book, training, the SQLite log and read models)
 * runs on the demo set, with a sandbox that answers at once instead of running python. That
 * stand-in is named for what it is (InstantVerdictsForBenchmark) and exists only here.
 * Baseline in the same run: appending the run's own execution records (its ExecutionRequested
 * and ProgramExecuted events, as stored) to a fresh SQLite log in batches, the floor cost of
 * merely recording the verdicts. Both sides
 * run at the same durability (--synchronous, default full, the run default).
 *
 *   npm run bench -- orchestration [--rounds 8] [--problems 24] [--synchronous full|normal]
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../src/config/load.js';
import { runExperiment } from '../src/actors/run.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import type { RunRequest, Sandbox, TestResult } from '../src/sandbox/api.js';
import type { EventEnvelope, NewEvent } from '../src/events/envelope.js';
import { allPairResults } from '../src/projections/recorded-verdicts.js';
import { flag } from './flags.js';

/** Verdicts from a hash of (program, test): deterministic, and no process is started. */
export class InstantVerdictsForBenchmark implements Sandbox {
  readonly isolation = 'rlimits' as const;
  calls = 0;
  async run(req: RunRequest): Promise<TestResult[]> {
    this.calls++;
    return req.tests.map((t, i) => {
      const h = createHash('sha256').update(req.program).update(JSON.stringify(t)).digest()[0]!;
      const expectedKnown = t.style === 'stdio' ? t.output !== null : t.style === 'call' ? t.expected !== undefined : true;
      const verdict = !expectedKnown ? (h < 20 ? 'runtime_error' : 'accepted') : h < 90 ? 'wrong_answer' : 'accepted';
      return { test: i, verdict, timeMs: 0, memoryKb: 0, output: t.style === 'stdio' ? '0\n' : '0', isolated: false };
    });
  }
  async close(): Promise<void> {}
}

const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

type Synchronous = 'full' | 'normal';

function synchronousFlag(args: string[]): Synchronous {
  const i = args.indexOf('--synchronous');
  if (i < 0) return 'full';
  const v = args[i + 1];
  if (v !== 'full' && v !== 'normal') throw new Error(`--synchronous needs full or normal, got "${v ?? ''}"`);
  return v;
}

async function rawAppendBaseline(dir: string, records: NewEvent[], synchronous: Synchronous): Promise<number> {
  const log = await openSqliteLog(path.join(dir, 'baseline.db'), { synchronous });
  const started = performance.now();
  const batch = 64;
  for (let at = 0; at < records.length; at += batch) {
    await log.append('executor', records.slice(at, at + batch), { commitId: `baseline/${at}` });
  }
  const seconds = (performance.now() - started) / 1000;
  await log.close();
  return seconds;
}

export async function runBench(args: string[]): Promise<void> {
  const rounds = flag(args, 'rounds', 8);
  const problems = flag(args, 'problems', 24);
  const synchronous = synchronousFlag(args);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-orch-'));
  try {
    const config = parseConfig({
      name: 'bench-orchestration',
      seed: 1,
      rounds,
      dir: root,
      log: { synchronous },
      dataset: { format: 'demo', limit: problems },
      sampling: { problemsPerRound: problems, groupSize: 8, suitesPerProgram: 2, suiteSize: 8, whiteBox: false },
      selection: { testSamples: 'all' },
    });
    // The candidate catalog (AST mutants, via python) is built outside the measured run.
    const cacheDir = path.join(os.tmpdir(), 'crucible-bench-catalog');
    const warm = parseConfig({ ...config, rounds: 1, name: 'bench-warmup' });
    await runExperiment({ config: warm, cacheDir, sandbox: new InstantVerdictsForBenchmark() });

    const sandbox = new InstantVerdictsForBenchmark();
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    const outcome = await runExperiment({ config, cacheDir, sandbox });
    const seconds = (performance.now() - started) / 1000;
    const cpu = cpuSeconds(process.cpuUsage(cpuBefore));

    const log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
    let events = 0;
    const stored: EventEnvelope[] = [];
    for await (const e of log.read()) {
      events++;
      if (e.type === 'ExecutionRequested' || e.type === 'ProgramExecuted') stored.push(e);
    }
    await log.close();
    const results = allPairResults(stored);
    const pairs = results.length;
    const cached = results.filter((r) => r.cached).length;
    const records = stored.map((e): NewEvent => ({ type: e.type, runId: 'baseline', data: e.data }));
    const baselineCpuBefore = process.cpuUsage();
    const baseline = await rawAppendBaseline(root, records, synchronous);
    const baselineCpu = cpuSeconds(process.cpuUsage(baselineCpuBefore));
    const us = (s: number) => ((s * 1e6) / pairs).toFixed(1);
    console.log(
      `orchestration: ${rounds} rounds x ${problems} problems, ${events} events, ${pairs} (program, test) pairs (${cached} answered from the execution cache); synchronous ${synchronous.toUpperCase()} on both sides`,
    );
    // CPU time beside wall time: on a shared machine the wall clock also counts waiting for a core.
    console.log(
      `  full actor loop, instant verdicts: ${seconds.toFixed(2)} s  = ${us(seconds)} us per pair  (${Math.round(pairs / seconds)} pairs/s); CPU ${us(cpu)} us per pair`,
    );
    console.log(
      `  baseline, batched append of the run's ${records.length} execution records (${pairs} results): ${baseline.toFixed(2)} s = ${us(baseline)} us per pair; CPU ${us(baselineCpu)} us per pair`,
    );
    console.log(`  overhead over recording alone: ${(seconds / baseline).toFixed(1)}x; sandbox calls: ${sandbox.calls}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
