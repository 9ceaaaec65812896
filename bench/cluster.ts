/**
 * A Code-A1 step's time on N nodes of C cores each, predicted from figures measured here
 * (cluster-model.ts holds the model):
 *  - the sandbox's cost per (program, test) pair: the requests a real step of the config sent
 *    the sandbox (recorded in the N = 1 check's run below), sent again with every sandbox server
 *    busy (core-ms = wall x cores / pairs);
 *  - the log's round trip per program on JetStream (publish the task, claim, append its
 *    ProgramExecuted, ack: workers.ts's measure, one server);
 *  - a stand-in step of Code-A1's shape (scale.ts's config and stand-in policy, instant verdicts,
 *    the real actors and SQLite log): results and programs per nominal pair, the whole loop's CPU
 *    per result, the time inside the Judge's and the Learner's effects per result; then the
 *    Judge's and the Learner's fold from position 0 of that log (fold.ts's measure): CPU per
 *    result and the events/s a replacement worker folds.
 * Then one row per N, and a check of N = 1 against a real step of the config run here.
 *
 *   npm run bench -- cluster [--nodes 1,2,4,8,16] [--cores 16] [--judge K] [--problems 256]
 *     [--config configs/code-a1.yaml] [--sample 3] [--round-trips 200] [--stand-in-problems 32]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfigFile } from '../src/config/load.js';
import { LOG_FILE, runExperiment, sandboxOptions } from '../src/actors/run.js';
import { judge } from '../src/actors/judge.js';
import { learner } from '../src/actors/learner.js';
import type { ActorDefinition } from '../src/actors/runtime.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import type { EventEnvelope } from '../src/events/envelope.js';
import { allPairResults } from '../src/projections/recorded-verdicts.js';
import { natsDown, natsUp, readCluster } from '../src/nats-ops/nats-server.js';
import { createSandbox } from '../src/sandbox/index.js';
import type { RunRequest, Sandbox, TestResult } from '../src/sandbox/api.js';
import type { RunConfig } from '../src/config/schema.js';
import {
  bestJudgeShares,
  nodesWhereRoleBounds,
  predictStep,
  stepWork,
  MAX_JUDGE_SHARES,
  type Figures,
  type SerialRole,
  type StepWork,
} from './cluster-model.js';
import { foldFromStart } from './fold.js';
import { flag, listFlag } from './flags.js';
import { InstantVerdictsForBenchmark } from './orchestration.js';
import { scaleConfig } from './scale.js';
import { standInRun } from './scale-policy.js';
import { roundTrip } from './workers.js';

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** Core-ms per (program, test) pair: every `every`-th request a real step sent (a step's requests
 * come problem by problem, and a few hold programs that run to their time limit on every test,
 * so a sample spread over the step, each request run to its end), sent again with twice as many
 * in flight as this machine has cores, so every sandbox server is busy. */
async function sandboxCost(
  config: RunConfig,
  recorded: readonly RunRequest[],
  every: number,
): Promise<{ ms: number; candidateCpuMs: number; pairs: number; requests: number; isolation: string; wall: number }> {
  const requests = recorded.filter((_, i) => i % every === 0);
  if (requests.length === 0) throw new Error('the real step sent the sandbox no request');
  const cores = os.availableParallelism();
  const sandbox = await createSandbox({ ...sandboxOptions(config), warn: () => undefined });
  let pairs = 0;
  let candidateMs = 0;
  let wall = 0;
  let isolation = '';
  try {
    // Every server started before the measure (they start on first use).
    const warm = { program: 'pass\n', tests: [{ style: 'stdio' as const, input: '', output: null }] };
    await Promise.all(Array.from({ length: 2 * cores }, () => sandbox.run(warm)));
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 2 * cores }, async () => {
        while (next < requests.length) {
          const got = await sandbox.run(requests[next++]!);
          const broken = got.find((r) => r.verdict === 'sandbox_error');
          if (broken) throw new Error(`the sandbox failed: ${broken.message ?? 'no detail'}`);
          pairs += got.length;
          for (const r of got) candidateMs += r.timeMs;
        }
      }),
    );
    wall = (performance.now() - t0) / 1000;
    isolation = sandbox.isolation;
  } finally {
    await sandbox.close();
  }
  // Wall x cores, as the step's executors see it: on this shared machine it counts waiting for a
  // core too. The candidates' own CPU time (TestResult.timeMs) is a floor: it leaves out the
  // fork-servers, the oracle processes and the comparison.
  return { ms: (wall * 1000 * cores) / pairs, candidateCpuMs: candidateMs / pairs, pairs, requests: requests.length, isolation, wall };
}

/** The run's sandbox, keeping each request sent once `recording` is set (after the catalog's). */
class RecordingSandbox implements Sandbox {
  readonly requests: RunRequest[] = [];
  recording = false;
  constructor(private readonly inner: Sandbox) {}
  get isolation(): Sandbox['isolation'] {
    return this.inner.isolation;
  }
  run(request: RunRequest): Promise<TestResult[]> {
    if (this.recording) this.requests.push(request);
    return this.inner.run(request);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** CPU seconds of this process while at least one of the actor's effects is in flight: an upper
 * bound of its effects' own CPU (the in-process loop may run other actors' work at their awaits),
 * and unlike wall time not inflated by waiting for a core on a loaded machine. */
function timeEffects<D extends ActorDefinition<never, never, never, never>>(def: D): { seconds: () => number; restore: () => void } {
  const original = def.run;
  let inFlight = 0;
  let since = 0;
  let total = 0;
  (def as { run: unknown }).run = async (...a: Parameters<D['run']>) => {
    if (inFlight++ === 0) since = cpu();
    try {
      return await (original as (...x: unknown[]) => Promise<unknown>).apply(def, a);
    } finally {
      if (--inFlight === 0) total += cpu() - since;
    }
  };
  return { seconds: () => total, restore: () => void ((def as { run: unknown }).run = original) };
}

interface StandIn {
  nominal: number;
  results: number;
  programs: number;
  events: number;
  loopUs: number;
  judgeEffectUs: number;
  learnerEffectUs: number;
  judgeFoldUs: number;
  learnerFoldUs: number;
  foldEventsPerSecond: number;
  foldEventsPerCpuSecond: number;
  seconds: number;
}

/** One step of Code-A1's shape with `problems` problems, in-process, instant verdicts. */
async function standInStep(root: string, problems: number): Promise<StandIn> {
  const { config } = scaleConfig(1e-9, problems, path.join(root, 'stand-in'));
  const judged = timeEffects(judge as never);
  const learned = timeEffects(learner as never);
  const t0 = performance.now();
  const c0 = cpu();
  let outcome;
  try {
    outcome = await runExperiment({ config, cacheDir: null, sandbox: new InstantVerdictsForBenchmark(), prepared: standInRun(problems, config.seed) });
  } finally {
    judged.restore();
    learned.restore();
  }
  const loopCpu = cpu() - c0;
  const seconds = (performance.now() - t0) / 1000;
  const log = await openSqliteLog(path.join(outcome.dir, LOG_FILE), { create: false, readOnly: true });
  try {
    let events = 0;
    let programs = 0;
    let results = 0;
    for await (const page of log.readPages!()) {
      for (const e of page) {
        events++;
        if (e.type === 'ProgramExecuted') {
          programs++;
          results += (e.data as { pairs: unknown[] }).pairs.length;
        }
      }
    }
    const j = await foldFromStart(log, outcome.runId, 'judge');
    const l = await foldFromStart(log, outcome.runId, 'learner');
    const per = (s: number) => (s * 1e6) / results;
    return {
      nominal: problems * config.sampling.groupSize * config.sampling.suitesPerProgram * config.sampling.suiteSize,
      results,
      programs,
      events,
      loopUs: per(loopCpu),
      judgeEffectUs: per(judged.seconds()),
      learnerEffectUs: per(learned.seconds()),
      judgeFoldUs: per(j.cpu),
      learnerFoldUs: per(l.cpu),
      foldEventsPerSecond: j.folded / j.wall,
      foldEventsPerCpuSecond: j.folded / j.cpu,
      seconds,
    };
  } finally {
    await log.close();
  }
}

/** A real step of the config here, in-process on the SQLite log: its round's seconds, the pairs
 * the sandbox ran and the programs it ran them in, and the requests it sent the sandbox. */
async function realStep(
  root: string,
  configFile: string,
): Promise<{ seconds: number; load: number; work: StepWork; cached: number; problems: number; config: RunConfig; requests: RunRequest[] }> {
  const config = loadConfigFile(configFile, { overrides: ['rounds=1', `dir=${path.join(root, 'real')}`] });
  const sandbox = new RecordingSandbox(await createSandbox(sandboxOptions(config)));
  let outcome;
  try {
    // The candidate catalog (built through the sandbox, kept between runs) is outside the step:
    // requests are recorded from the actors' first step on.
    outcome = await runExperiment({
      config,
      sandbox,
      cacheDir: path.join(os.tmpdir(), 'crucible-bench-catalog'),
      onStep: () => void (sandbox.recording = true),
    });
  } finally {
    await sandbox.close();
  }
  const log = await openSqliteLog(path.join(outcome.dir, LOG_FILE), { create: false, readOnly: true });
  const events: EventEnvelope[] = [];
  try {
    for await (const e of log.read({}, { runId: outcome.runId, types: ['ExecutionRequested', 'ProgramExecuted'] })) events.push(e);
  } finally {
    await log.close();
  }
  const all = allPairResults(events);
  const seconds = outcome.rows[0]?.seconds;
  if (seconds === null || seconds === undefined) throw new Error(`${configFile}: the real step recorded no round time`);
  return {
    seconds,
    load: os.loadavg()[0]!,
    work: { results: all.filter((r) => !r.cached).length, programs: events.filter((e) => e.type === 'ProgramExecuted').length },
    cached: all.filter((r) => r.cached).length,
    problems: config.sampling.problemsPerRound,
    config,
    requests: sandbox.requests,
  };
}

const s = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

export async function runBench(args: string[]): Promise<void> {
  const nodes = listFlag(args, 'nodes', [1, 2, 4, 8, 16]);
  const cores = flag(args, 'cores', 16);
  const fixedShares = args.includes('--judge') ? flag(args, 'judge', 1) : null;
  if (fixedShares !== null && fixedShares > MAX_JUDGE_SHARES) throw new Error(`--judge: at most ${MAX_JUDGE_SHARES} shares, got ${fixedShares}`);
  const problems = flag(args, 'problems', 256);
  const sample = flag(args, 'sample', 3);
  const trips = flag(args, 'round-trips', 200);
  const standInProblems = flag(args, 'stand-in-problems', 32);
  const configAt = args.indexOf('--config');
  const configFile = configAt >= 0 ? args[configAt + 1] : 'configs/code-a1.yaml';
  if (!configFile) throw new Error('--config needs a config file');
  const config = loadConfigFile(configFile);
  const here = os.availableParallelism();
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-cluster-'));
  try {
    console.log(
      `cluster: ${configFile}, this machine ${here} cores, load average ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );
    // The real step first: the sandbox is measured on the requests it sent.
    const real = await realStep(root, configFile);
    console.log('measured here:');
    const sb = await sandboxCost(real.config, real.requests, sample);
    console.log(
      `  sandbox: ${sb.ms.toFixed(2)} core-ms per (program, test) pair, wall x cores at this machine's load (the candidates' own CPU time alone: ${sb.candidateCpuMs.toFixed(2)} ms, a floor; ${sb.isolation}; ${sample === 1 ? 'each' : `one in ${sample}`} of the ${real.requests.length} requests a real step of the config sent, sent again: ${sb.requests} requests, ${sb.pairs} pairs in ${sb.wall.toFixed(1)} s, ${2 * here} in flight, x ${here} cores)`,
    );
    const natsDir = path.join(root, 'nats');
    await natsUp({ nodes: 1, dir: natsDir });
    let rtMs: number;
    try {
      rtMs = await roundTrip(readCluster(natsDir).urls.join(','), trips);
    } finally {
      await natsDown(natsDir).catch(() => undefined);
    }
    console.log(
      `  log round trip: ${rtMs.toFixed(2)} ms per program (JetStream, one server on loopback: publish task, claim, append ProgramExecuted, ack; ${trips} in a row)`,
    );
    const si = await standInStep(root, standInProblems);
    const perNominal = (x: number) => x / si.nominal;
    console.log(
      `  stand-in step (${standInProblems} problems of Code-A1's shape, instant verdicts, in-process on SQLite, ${s(si.seconds)} s): ${si.results} results (${perNominal(si.results).toFixed(2)} per nominal pair) in ${si.programs} programs (${(si.results / si.programs).toFixed(1)} pairs each), ${si.events} events; the whole loop ${si.loopUs.toFixed(1)} us CPU per result`,
    );
    console.log(
      `  Judge: its fold from position 0 ${si.judgeFoldUs.toFixed(2)} us CPU per result (every judge pays it); inside its effects ${si.judgeEffectUs.toFixed(2)} us CPU per result (the process's CPU while one is in flight; divided among the shares)`,
    );
    console.log(
      `  Learner: its fold ${si.learnerFoldUs.toFixed(2)} us CPU per result; inside its effects ${si.learnerEffectUs.toFixed(2)} us CPU per result (the stand-in policy's training, not a model's)`,
    );
    console.log(
      `  fold rate: ${Math.round(si.foldEventsPerSecond).toLocaleString('en')} events/s of wall time, ${Math.round(si.foldEventsPerCpuSecond).toLocaleString('en')} per CPU second (the Judge refolding the stand-in log from position 0, as a replacement judge does without a snapshot)`,
    );

    const shape = {
      problems,
      groupSize: config.sampling.groupSize,
      suitesPerProgram: config.sampling.suitesPerProgram,
      suiteSize: config.sampling.suiteSize,
      resultsPerNominalPair: perNominal(si.results),
      programsPerNominalPair: perNominal(si.programs),
    };
    const work = stepWork(shape);
    const figures: Figures = { sandboxMsPerPair: sb.ms, roundTripMsPerProgram: rtMs };
    const roles = (shares: number): SerialRole[] => [
      { name: 'judge', usPerResult: si.judgeFoldUs, splitUsPerResult: si.judgeEffectUs, shares },
      { name: 'learner', usPerResult: si.learnerFoldUs + si.learnerEffectUs, splitUsPerResult: 0, shares: 1 },
    ];
    const stepEvents = perNominal(si.events) * problems * shape.groupSize * shape.suitesPerProgram * shape.suiteSize;
    console.log('');
    console.log(
      `a step: ${problems} problems x ${shape.groupSize} programs x ${shape.suitesPerProgram} suites x ${shape.suiteSize} tests x ${shape.resultsPerNominalPair.toFixed(2)} results per pair = ${Math.round(work.results).toLocaleString('en')} results in ${Math.round(work.programs).toLocaleString('en')} programs, about ${Math.round(stepEvents).toLocaleString('en')} events (a replacement judge refolds one step in ${s(stepEvents / si.foldEventsPerCpuSecond)} s on a core of its own, ${s(stepEvents / si.foldEventsPerSecond)} s at this machine's load)`,
    );
    console.log(
      `predicted on N nodes of ${cores} cores (judge=K: ${fixedShares === null ? 'the fewest shares with the shortest step' : `${fixedShares} shares`}):`,
    );
    console.log(
      ['N', 'K', 'step s', 'executors s', '(sandbox', 'log)', 'judge s', 'learner s', 'bottleneck']
        .map((h, i) => (i === 8 ? `  ${h}` : h.padStart(i < 2 ? 4 : 12)))
        .join(''),
    );
    for (const n of nodes) {
      const cluster = { nodes: n, cores };
      const k = fixedShares ?? bestJudgeShares(work, figures, roles, cluster);
      const p = predictStep(work, figures, roles(k), cluster);
      console.log(
        [
          String(n).padStart(4),
          String(k).padStart(4),
          ...[p.seconds, p.stages.executors!, p.sandboxSeconds, p.logSeconds, p.stages.judge!, p.stages.learner!].map((x) => s(x).padStart(12)),
          `  ${p.bottleneck}`,
        ].join(''),
      );
    }
    for (const k of fixedShares === null ? [1, MAX_JUDGE_SHARES] : [fixedShares]) {
      const n = nodesWhereRoleBounds(work, figures, roles(k), cores);
      const role = n === null ? null : predictStep(work, figures, roles(k), { nodes: n, cores }).bottleneck;
      console.log(
        `  with judge=${k}: ${n === null ? 'the executors bound the step up to 4096 nodes' : `the ${role} bounds the step from N = ${n} (${n * cores} cores)`}`,
      );
    }
    // A dedicated node's sandbox costs less than this shared machine's wall x cores: the floor.
    const floor = { ...figures, sandboxMsPerPair: sb.candidateCpuMs };
    const floorRows = nodes.map((n) => {
      const cluster = { nodes: n, cores };
      const p = predictStep(work, floor, roles(fixedShares ?? bestJudgeShares(work, floor, roles, cluster)), cluster);
      return `N = ${n} ${s(p.seconds)} s (${p.bottleneck})`;
    });
    console.log(`  with the sandbox at its floor (${sb.candidateCpuMs.toFixed(2)} ms per pair): ${floorRows.join(', ')}`);

    // N = 1 here: the same config run for real, in-process. One Node thread does every actor's
    // work, the SQLite log's and the read models' (the stand-in's whole-loop CPU per result),
    // beside the sandbox's servers; no JetStream round trip.
    console.log('');
    const oneThread: SerialRole[] = [{ name: 'loop', usPerResult: si.loopUs, splitUsPerResult: 0, shares: 1 }];
    const inProcess = { sandboxMsPerPair: sb.ms, roundTripMsPerProgram: 0 };
    const byPairs = predictStep(real.work, inProcess, oneThread, { nodes: 1, cores: here });
    const bySize = predictStep(stepWork({ ...shape, problems: real.problems }), inProcess, oneThread, { nodes: 1, cores: here });
    // The same with the figures as this machine's load made them: the sandbox's wall x cores per
    // pair, the stand-in loop's wall time per result.
    const loopWallUs = (si.seconds * 1e6) / si.results;
    const atLoad = predictStep(real.work, inProcess, [{ ...oneThread[0]!, usPerResult: loopWallUs }], {
      nodes: 1,
      cores: here,
    });
    console.log(
      `N = 1 check: a real step of ${configFile} here (${real.problems} problems, in-process on SQLite, ${here} cores, load average ${real.load.toFixed(1)} at its end): ${s(real.seconds)} s measured; ${real.work.results} pairs run in ${real.work.programs} programs (${real.cached} answered from recorded verdicts; the sandbox got ${real.requests.reduce((n, r) => n + r.tests.length, 0)} tests in ${real.requests.length} requests)`,
    );
    console.log(
      `  predicted from the pairs it ran: ${s(byPairs.seconds)} s (bottleneck ${byPairs.bottleneck}: sandbox ${s(byPairs.sandboxSeconds)} s + the loop's ${si.loopUs.toFixed(0)} us per result over ${here} cores) -> predicted/measured ${(byPairs.seconds / real.seconds).toFixed(2)}`,
    );
    console.log(
      `  the same with the figures at this machine's load (the loop's ${loopWallUs.toFixed(0)} us of wall per result instead of its CPU): ${s(atLoad.seconds)} s -> ${(atLoad.seconds / real.seconds).toFixed(2)}`,
    );
    console.log(
      `  predicted from the config's size, as a model's fresh samples would make it (${Math.round(stepWork({ ...shape, problems: real.problems }).results)} results at the stand-in's ${shape.resultsPerNominalPair.toFixed(2)} per pair): ${s(bySize.seconds)} s -> ${(bySize.seconds / real.seconds).toFixed(2)}; not a check of the model's speed: the catalog policy's programs and tests repeat, so its step ran ${((100 * real.work.results) / stepWork({ ...shape, problems: real.problems }).results).toFixed(0)}% of those pairs`,
    );
    console.log(
      "left out: sampling and training on GPUs (the policies and the Learner's step are the offline ones here), the Conductor, Solver and Adversary, the log server's own capacity (each round trip is one client's, on one server, loopback), the network between nodes, process start-up, the Judge's snapshots and its own appends, a step's tail (the last problems of a step wait for their last programs), and the catalog policy's recorded-verdict reuse (a model samples fresh programs: every pair runs)",
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
