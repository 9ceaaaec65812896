/**
 * The Conductor schedules rounds: which problems, with which policy versions, and when a round
 * is over (every problem judged, both policies trained). Its decisions depend only on the
 * content of the log, never on timing, so a replayed or resumed run schedules the same work.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { ActorDefinition, LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { configOf, dataOf } from './events.js';

export interface ConductorContext {
  rounds: number;
  problemsPerRound: number;
  groupSize: number;
  whiteBox: boolean;
  problems: { problemId: string; problemHash: string }[];
  round: number;
  /** Problems of the current round that the Judge has finished. */
  judged: string[];
  /** Latest published version per role, and the round it was trained on. */
  versions: { code: number; test: number };
  trainedRound: { code: number; test: number };
  completedRound: number;
}

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
            };
          }),
        },
      },
    },
    running: {
      on: {
        RoundStarted: {
          actions: assign(({ event }) => ({ round: dataOf(event.envelope, 'RoundStarted').round, judged: [] })),
        },
        ProblemEvaluated: {
          actions: assign(({ context, event }) => {
            const d = dataOf(event.envelope, 'ProblemEvaluated');
            if (d.round !== context.round || context.judged.includes(d.problemId)) return {};
            return { judged: [...context.judged, d.problemId] };
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

export type ConductorEffect =
  | { key: string; kind: 'start-round'; round: number }
  | { key: string; kind: 'complete-round'; round: number; last: boolean };

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

export const conductor: ActorDefinition<typeof conductorMachine, ConductorEffect, RunEnv> = {
  name: 'conductor',
  machine: conductorMachine,
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
