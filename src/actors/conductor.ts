/**
 * The Conductor schedules rounds: which problems, with which policy versions, and when a round
 * is over (every problem judged, both policies trained). Its decisions depend only on the
 * content of the log, never on timing, so a replayed or resumed run schedules the same work.
 */
import { assign, setup } from 'xstate';
import { z } from 'zod';
import type { SnapshotFrom } from 'xstate';
import type { ActorDefinition, LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { configOf, dataOf } from './events.js';
import { initialTcsStage, nextTcsStage, type TcsStageState as RewardsTcsStage } from '../rewards/tcs.js';
import { agree, type Agree } from './type-agreement.js';

// The rewards layer's type, described here (the rewards know no snapshot).
const TcsStageState = z.strictObject({ stage: z.union([z.literal(1), z.literal(2)]), roundsInStage: z.int().nonnegative() });
agree<Agree<z.infer<typeof TcsStageState>, RewardsTcsStage>>();

const ByRole = z.strictObject({ code: z.int(), test: z.int() });

/** Its machine context, which a snapshot stores (see snapshot-schema.ts). */
export const ConductorContext = z.strictObject({
  rounds: z.int().nonnegative(),
  problemsPerRound: z.int().nonnegative(),
  groupSize: z.int().nonnegative(),
  whiteBox: z.boolean(),
  problems: z.array(z.strictObject({ problemId: z.string(), problemHash: z.string() })),
  round: z.int().nonnegative(),
  /** Problems of the current round that the Judge has finished. */
  judged: z.array(z.string()),
  /** Latest published version per role (-1: none yet), and the round it was trained on. */
  versions: ByRole,
  trainedRound: ByRole,
  completedRound: z.int().nonnegative(),
  method: z.string(),
  /** TCS: the stage state after the last decision, and the current round's test tallies. */
  tcs: TcsStageState,
  tallies: z.strictObject({ sampled: z.int().nonnegative(), valid: z.int().nonnegative() }),
});
export type ConductorContext = z.infer<typeof ConductorContext>;

const initial: ConductorContext = {
  rounds: 0,
  problemsPerRound: 0,
  groupSize: 0,
  whiteBox: true,
  problems: [],
  round: 0,
  judged: [],
  versions: { code: -1, test: -1 },
  trainedRound: { code: -1, test: -1 },
  completedRound: 0,
  method: 'code-a1',
  tcs: initialTcsStage(),
  tallies: { sampled: 0, valid: 0 },
};

export const conductorMachine = setup({
  types: { context: {} as ConductorContext, events: {} as LogEvent },
}).createMachine({
  id: 'conductor',
  context: initial,
  initial: 'idle',
  states: {
    idle: {
      on: {
        RunStarted: {
          target: 'running',
          actions: assign(({ event }) => {
            const d = dataOf(event.envelope, 'RunStarted');
            const config = configOf(event.envelope);
            return {
              rounds: config.rounds,
              problemsPerRound: Math.min(config.sampling.problemsPerRound, d.problems.length),
              groupSize: config.sampling.groupSize,
              whiteBox: config.sampling.whiteBox,
              problems: d.problems,
              method: config.method,
            };
          }),
        },
      },
    },
    running: {
      on: {
        RoundStarted: {
          actions: assign(({ event }) => ({ round: dataOf(event.envelope, 'RoundStarted').round, judged: [], tallies: { sampled: 0, valid: 0 } })),
        },
        StageDecided: {
          actions: assign(({ event }) => {
            const d = dataOf(event.envelope, 'StageDecided');
            return { tcs: { stage: d.stage, roundsInStage: d.roundsInStage } };
          }),
        },
        ProblemEvaluated: {
          actions: assign(({ context, event }) => {
            const d = dataOf(event.envelope, 'ProblemEvaluated');
            if (d.round !== context.round || context.judged.includes(d.problemId)) return {};
            const tallies = { sampled: context.tallies.sampled + d.tests.sampled, valid: context.tallies.valid + d.tests.valid };
            return { judged: [...context.judged, d.problemId], tallies };
          }),
        },
        PolicyVersionPublished: {
          actions: assign(({ context, event }) => {
            const d = dataOf(event.envelope, 'PolicyVersionPublished');
            const role = d.policy.role;
            return {
              versions: { ...context.versions, [role]: d.policy.version },
              trainedRound: { ...context.trainedRound, [role]: d.round },
            };
          }),
        },
        RoundCompleted: {
          actions: assign(({ event }) => ({ completedRound: dataOf(event.envelope, 'RoundCompleted').round })),
        },
        RunCompleted: { target: 'done' },
      },
    },
    done: { type: 'final' },
  },
});

type Snapshot = SnapshotFrom<typeof conductorMachine>;

export type ConductorEffect = { key: string; kind: 'start-round'; round: number } | { key: string; kind: 'complete-round'; round: number; last: boolean };

/** Round r (1-based) takes the next `problemsPerRound` problems, wrapping around the dataset. */
export function problemsForRound(ctx: ConductorContext, round: number): ConductorContext['problems'] {
  const n = ctx.problems.length;
  const start = ((round - 1) * ctx.problemsPerRound) % n;
  return Array.from({ length: ctx.problemsPerRound }, (_, i) => ctx.problems[(start + i) % n]!);
}

export function conductorPending(snapshot: Snapshot): ConductorEffect[] {
  if (!snapshot.matches('running')) return [];
  const c = snapshot.context;
  const policiesReady = c.versions.code >= 0 && c.versions.test >= 0;
  if (c.round === c.completedRound) {
    if (c.round >= c.rounds || !policiesReady) return [];
    const round = c.round + 1;
    return [{ key: `round/${round}/start`, kind: 'start-round', round }];
  }
  const allJudged = c.judged.length === c.problemsPerRound;
  const trained = c.trainedRound.code >= c.round && c.trainedRound.test >= c.round;
  if (allJudged && trained) {
    return [{ key: `round/${c.round}/complete`, kind: 'complete-round', round: c.round, last: c.round >= c.rounds }];
  }
  return [];
}

/** TCS: the stage of a round from the previous round's validity rate (round 1: stage 1). */
function stageDecision(env: RunEnv, c: ConductorContext, round: number) {
  if (round === 1) return env.event('StageDecided', { round, stage: 1, switched: false, roundsInStage: 0, validityRate: null });
  const validityRate = c.tallies.sampled === 0 ? 0 : c.tallies.valid / c.tallies.sampled;
  const next = nextTcsStage(c.tcs, validityRate, { switchRule: env.config.tcs.switchRule });
  return env.event('StageDecided', { round, stage: next.stage, switched: next.stage !== c.tcs.stage, roundsInStage: next.roundsInStage, validityRate });
}

export const conductor: ActorDefinition<typeof conductorMachine, ConductorEffect, RunEnv> = {
  name: 'conductor',
  machine: conductorMachine,
  context: ConductorContext,
  pending: conductorPending,
  async run(effect, env, snapshot) {
    const c = snapshot.context;
    if (effect.kind === 'complete-round') {
      const events = [env.event('RoundCompleted', { round: effect.round })];
      if (effect.last) events.push(env.event('RunCompleted', { rounds: effect.round }));
      return events;
    }
    const scheduled = problemsForRound(c, effect.round);
    return [
      env.event('RoundStarted', { round: effect.round, problemIds: scheduled.map((p) => p.problemId) }),
      ...(c.method === 'tcs' ? [stageDecision(env, c, effect.round)] : []),
      ...scheduled.map((p) =>
        env.event('ProblemScheduled', {
          round: effect.round,
          problemId: p.problemId,
          problemHash: p.problemHash,
          groupSize: c.groupSize,
          whiteBox: c.whiteBox,
          codeVersion: c.versions.code,
          testVersion: c.versions.test,
        }),
      ),
    ];
  },
};
