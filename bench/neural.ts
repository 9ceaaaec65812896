/**
 * `crucible bench neural [--run DIR] [--rounds N]`: where a neural run's wall time goes, per
 * round, from the event timestamps in its log: generation (round start to the last sample),
 * execution (to the last executed program), judging (to the last reward) and training (to the
 * last published version), so the four add up to the round's time; and the warm start (SFT)
 * before round 1. Beside training, the baseline from the same run: the seconds the bridge itself
 * reported for its steps (TrainingStepCompleted metrics.seconds), so the rest of the training
 * phase is the Learner's overhead (batch files, publish, weight sync; in the warm start, its
 * recorded checkpoints).
 * Without --run it runs configs/neural-demo.yaml cut to N rounds (default 2) and reads that.
 * `--run` may be given several times (the seeds of a config and of its control): each run's table,
 * then one line per run and their sum, by phase.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfigFile } from '../src/config/load.js';
import { runExperiment } from '../src/actors/run.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import type { EventEnvelope } from '../src/events/envelope.js';
import { PACKAGE_ROOT } from '../src/core/package-root.js';

const PHASES = {
  generation: ['SolutionSampled', 'HeldOutSampled', 'TestsSampled', 'ModelSampled'],
  execution: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
  judging: ['TestsJudged', 'RewardsAssigned', 'MistakeBookUpdated', 'ProblemEvaluated'],
  training: ['TrainingBatchFormed', 'TrainingStepCompleted', 'PolicyVersionPublished', 'WeightsSynced'],
} as const;
type Phase = keyof typeof PHASES;

export interface RoundSplit {
  round: number;
  seconds: Record<Phase, number>;
  total: number;
  /** Sum of the bridge's own step times for the round's training steps. */
  bridgeStepSeconds: number;
}

/** The split of each round (critical path: each phase runs from the previous phase's last event
 * to its own last event), and the warm start before round 1. */
export function splitRounds(events: readonly EventEnvelope[]): {
  warmStart: { seconds: number; bridgeStepSeconds: number; steps: number; checkpoints: number; cached: number };
  rounds: RoundSplit[];
} {
  const t = (e: EventEnvelope) => Date.parse(e.at) / 1000;
  const roundOf = (e: EventEnvelope) => (e.data as { round?: number }).round;
  const started = events.find((e) => e.type === 'RunStarted');
  const warm = events.filter((e) => e.type === 'PolicyVersionPublished' && roundOf(e) === 0).at(-1);
  const warmSteps = events.filter((e) => e.type === 'TrainingStepCompleted' && roundOf(e) === 0);
  const stepSeconds = (list: EventEnvelope[]) => list.reduce((s, e) => s + ((e.data as { metrics: Record<string, number> }).metrics.seconds ?? 0), 0);
  const rounds: RoundSplit[] = [];
  // ExecutionRequested/ProgramExecuted name no round: attribute every event to the round open when it was written.
  let open: { round: number; start: number; last: Record<Phase, number> } | null = null;
  let steps: EventEnvelope[] = [];
  for (const e of events) {
    if (e.type === 'RoundStarted') {
      open = { round: roundOf(e)!, start: t(e), last: { generation: t(e), execution: 0, judging: 0, training: 0 } };
      steps = [];
      continue;
    }
    if (!open) continue;
    for (const phase of Object.keys(PHASES) as Phase[])
      if ((PHASES[phase] as readonly string[]).includes(e.type)) open.last[phase] = Math.max(open.last[phase], t(e));
    if (e.type === 'TrainingStepCompleted') steps.push(e);
    if (e.type === 'RoundCompleted') {
      const seconds = {} as Record<Phase, number>;
      let at = open.start;
      for (const phase of Object.keys(PHASES) as Phase[]) {
        const end = Math.max(at, open.last[phase]);
        seconds[phase] = end - at;
        at = end;
      }
      rounds.push({ round: open.round, seconds, total: t(e) - open.start, bridgeStepSeconds: stepSeconds(steps) });
      open = null;
    }
  }
  const checkpoints = events.filter((e) => e.type === 'WarmStartCheckpointed').map((e) => e.data as { cached: boolean });
  return {
    warmStart: {
      seconds: started && warm ? t(warm) - t(started) : 0,
      bridgeStepSeconds: stepSeconds(warmSteps),
      steps: warmSteps.length,
      checkpoints: checkpoints.length,
      cached: checkpoints.filter((c) => c.cached).length,
    },
    rounds,
  };
}

function argsOf(args: string[], name: string): string[] {
  return args.flatMap((a, i) => (a === name && args[i + 1] !== undefined ? [args[i + 1]!] : []));
}

function arg(args: string[], name: string): string | undefined {
  return argsOf(args, name)[0];
}

/** A run's wall time by phase: the warm start, the rounds' phases, and from RunStarted to RunCompleted. */
interface RunTotals {
  name: string;
  warmStart: number;
  cached: boolean;
  phases: Record<Phase, number>;
  wall: number;
}

async function readRun(dir: string): Promise<EventEnvelope[]> {
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  const events: EventEnvelope[] = [];
  for await (const e of log.read()) events.push(e);
  await log.close();
  return events;
}

const f = (x: number) => x.toFixed(1).padStart(10);

function printRun(dir: string, events: readonly EventEnvelope[]): RunTotals {
  const { warmStart, rounds } = splitRounds(events);
  console.log(`neural run ${path.basename(dir)}: wall seconds per round, from the log's event times`);
  console.log(
    `warm start (SFT, ${warmStart.steps} steps, ${warmStart.checkpoints} checkpoints recorded, ${warmStart.cached} of them from the warm-start cache): ${warmStart.seconds.toFixed(1)} s, of which the bridge's steps ${warmStart.bridgeStepSeconds.toFixed(1)} s`,
  );
  console.log(
    `${'round'.padStart(5)} ${'generation'.padStart(10)} ${'execution'.padStart(10)} ${'judging'.padStart(10)} ${'training'.padStart(10)} ${'total'.padStart(10)}   ${'bridge steps (baseline)'}`,
  );
  for (const r of rounds)
    console.log(
      `${String(r.round).padStart(5)} ${f(r.seconds.generation)} ${f(r.seconds.execution)} ${f(r.seconds.judging)} ${f(r.seconds.training)} ${f(r.total)}   ${f(r.bridgeStepSeconds)}`,
    );
  const sum = (k: Phase) => rounds.reduce((s, r) => s + r.seconds[k], 0);
  const all = rounds.reduce((s, r) => s + r.total, 0);
  if (all > 0)
    console.log(
      `share of round time: generation ${((100 * sum('generation')) / all).toFixed(0)}%, execution ${((100 * sum('execution')) / all).toFixed(0)}%, judging ${((100 * sum('judging')) / all).toFixed(0)}%, training ${((100 * sum('training')) / all).toFixed(0)}%`,
    );
  const t = (type: string) => {
    const e = events.find((x) => x.type === type);
    return e ? Date.parse(e.at) / 1000 : null;
  };
  const from = t('RunStarted');
  const to = t('RunCompleted');
  return {
    name: path.basename(dir),
    warmStart: warmStart.seconds,
    cached: warmStart.checkpoints > 0 && warmStart.cached === warmStart.checkpoints,
    phases: { generation: sum('generation'), execution: sum('execution'), judging: sum('judging'), training: sum('training') },
    wall: from !== null && to !== null ? to - from : 0,
  };
}

export async function runBench(args: string[]): Promise<void> {
  let dirs = argsOf(args, '--run');
  let scratch: string | null = null;
  if (dirs.length === 0) {
    const rounds = Number(arg(args, '--rounds') ?? 2);
    scratch = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-neural-'));
    const config = loadConfigFile(path.join(PACKAGE_ROOT, 'configs', 'neural-demo.yaml'), { overrides: [`rounds=${rounds}`, `dir=${scratch}`] });
    dirs = [(await runExperiment({ config, cacheDir: path.join(scratch, 'cache') })).dir];
  }
  try {
    const totals: RunTotals[] = [];
    for (const dir of dirs) {
      totals.push(printRun(dir, await readRun(dir)));
      console.log('');
    }
    if (totals.length < 2) return;
    const width = Math.max(3, ...totals.map((x) => x.name.length));
    console.log(`wall seconds by phase over ${totals.length} runs (warm start: * taken from the warm-start cache)`);
    console.log(
      `${'run'.padEnd(width)} ${'warm start'.padStart(11)} ${'generation'.padStart(10)} ${'execution'.padStart(10)} ${'judging'.padStart(10)} ${'training'.padStart(10)} ${'run'.padStart(10)}`,
    );
    const line = (name: string, x: Omit<RunTotals, 'name'>) =>
      console.log(
        `${name.padEnd(width)} ${f(x.warmStart)}${x.cached ? '*' : ' '} ${f(x.phases.generation)} ${f(x.phases.execution)} ${f(x.phases.judging)} ${f(x.phases.training)} ${f(x.wall)}`,
      );
    for (const x of totals) line(x.name, x);
    const add = (k: Phase) => totals.reduce((s, x) => s + x.phases[k], 0);
    line('all', {
      warmStart: totals.reduce((s, x) => s + x.warmStart, 0),
      cached: false,
      phases: { generation: add('generation'), execution: add('execution'), judging: add('judging'), training: add('training') },
      wall: totals.reduce((s, x) => s + x.wall, 0),
    });
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}
