/**
 * One problem in one round, as the Judge follows it: a child actor of the Judge's machine,
 * spawned when the problem is scheduled and stopped once it is evaluated. Its states are the
 * steps of the Judge (see judge.ts), and the Judge's pending work is read from them:
 *
 *   sampling            its programs and suites are being sampled
 *   awaitingOracle      all sampled: the reference's run on the tests is to be asked (unasked),
 *                       is running (asked), or is in (answered: the plan is due)
 *   awaitingExecutions  the tests are judged (TestsJudged) and the plan's requests issued: some
 *                       are running, or all are in (allIn: the judgement is due)
 *   judged              evaluated (ProblemEvaluated): final
 *
 * The Judge forwards it the log events that name it. Whether a request is in is counted here:
 * executors record a request's programs in one commit or in one commit each (separate
 * processes), so a request is complete once every program it names has its ProgramExecuted.
 */
import { assign, setup } from 'xstate';
import type { LogEvent } from './actor-fold.js';
import { dataOf } from './events.js';
import { requestSize } from '../events/catalog.js';
import { insertById } from './content-order.js';
import { ProblemRound } from './judge-state.js';

/** The round's problem-round key (`<round>/<problemId>`) of a request id (`<key>/<purpose>`). */
export const roundOfRequest = (requestId: string) => requestId.slice(0, requestId.lastIndexOf('/'));

const oracleOf = (p: ProblemRound) => `${p.key}/oracle`;

/** A request is complete: its verdicts are all recorded. A repeat changes nothing. */
function completed(p: ProblemRound, requestId: string): Partial<ProblemRound> {
  if (p.completed.includes(requestId)) return {};
  const { [requestId]: _done, ...awaiting } = p.awaiting;
  return { completed: [...p.completed, requestId], awaiting };
}

export const problemRoundMachine = setup({
  types: { context: {} as ProblemRound, events: {} as LogEvent, input: {} as ProblemRound },
  guards: {
    allSampled: ({ context: p }) =>
      p.solutions.length === p.groupSize && p.suites.length === p.groupSize * p.suitesPerProgram && (p.heldOut?.length ?? 0) === (p.heldOutSize ?? 0),
    oracleAsked: ({ context: p }) => p.issued.includes(oracleOf(p)),
    oracleAnswered: ({ context: p }) => p.completed.includes(oracleOf(p)),
    allIn: ({ context: p }) => p.issued.every((id) => p.completed.includes(id)),
  },
  actions: {
    issue: assign(({ context: p, event }) => {
      const d = dataOf(event.envelope, 'ExecutionRequested');
      // An empty request has nothing to wait for: it is complete when issued.
      if (requestSize(d) === 0) return { issued: [...p.issued, d.requestId], completed: [...p.completed, d.requestId] };
      // From the stored lists: expanding every pair into an object to find a few programs
      // cost more than the rest of the fold.
      const programs = new Set<string>();
      for (let i = 0; i < d.pairs.length; i += 2) programs.add(d.programs[d.pairs[i]!]!.programHash);
      return { issued: [...p.issued, d.requestId], awaiting: { ...p.awaiting, [d.requestId]: [...programs] } };
    }),
    programExecuted: assign(({ context: p, event }) => {
      const d = dataOf(event.envelope, 'ProgramExecuted');
      const left = p.awaiting[d.requestId];
      // Not awaited (issued by an older log without the list, or already complete): its first
      // result completes it, as when a request's results were always one commit.
      if (left === undefined) return completed(p, d.requestId);
      if (!left.includes(d.programHash)) return {};
      const rest = left.filter((h) => h !== d.programHash);
      return rest.length > 0 ? { awaiting: { ...p.awaiting, [d.requestId]: rest } } : completed(p, d.requestId);
    }),
    executionCompleted: assign(({ context: p, event }) => completed(p, dataOf(event.envelope, 'ExecutionCompleted').requestId)),
  },
}).createMachine({
  id: 'problemRound',
  context: ({ input }) => input,
  initial: 'sampling',
  on: {
    ExecutionRequested: { actions: 'issue' },
    ProgramExecuted: { actions: 'programExecuted' },
    ExecutionCompleted: { actions: 'executionCompleted' },
    ModelSampled: {
      actions: assign(({ context: p, event }) => {
        const d = dataOf(event.envelope, 'ModelSampled');
        return { responseTokens: { ...(p.responseTokens ?? {}), [d.sampleId]: d.tokensHash } };
      }),
    },
    TestsJudged: {
      target: '.awaitingExecutions',
      actions: assign(({ event }) => ({ judgedTests: dataOf(event.envelope, 'TestsJudged').tests })),
    },
    ProblemEvaluated: { target: '.judged' },
  },
  states: {
    sampling: {
      on: {
        SolutionSampled: {
          actions: assign(({ context: p, event }) => {
            const d = dataOf(event.envelope, 'SolutionSampled');
            // By id, not arrival: the order of solutions and suites sets reward groups and ties.
            const ref = { solutionId: d.solutionId, programHash: d.programHash, candidateId: d.sampling.candidateId };
            return { solutions: insertById(p.solutions, ref, (x) => x.solutionId) };
          }),
        },
        HeldOutSampled: {
          actions: assign(({ event }) => ({
            heldOut: dataOf(event.envelope, 'HeldOutSampled').programs.map((x) => ({ solutionId: x.programId, programHash: x.programHash, candidateId: null })),
          })),
        },
        TestsSampled: {
          actions: assign(({ context: p, event }) => {
            const d = dataOf(event.envelope, 'TestsSampled');
            const suite = {
              suiteId: d.suiteId,
              targetSolutionId: d.targetSolutionId,
              nonprintableRatio: d.nonprintableRatio,
              candidateId: d.sampling.candidateId,
              tests: d.tests,
            };
            return { suites: insertById(p.suites, suite, (x) => x.suiteId) };
          }),
        },
      },
      always: { guard: 'allSampled', target: 'awaitingOracle' },
    },
    awaitingOracle: {
      initial: 'unasked',
      states: {
        unasked: { always: { guard: 'oracleAsked', target: 'asked' } },
        asked: { always: { guard: 'oracleAnswered', target: 'answered' } },
        answered: {},
      },
    },
    awaitingExecutions: {
      initial: 'running',
      // A request issued after all were in (the plan's commit lists its requests after
      // TestsJudged) makes the round wait again.
      on: { ExecutionRequested: { target: '.running', actions: 'issue' } },
      states: {
        running: { always: { guard: 'allIn', target: 'allIn' } },
        allIn: {},
      },
    },
    judged: { type: 'final' },
  },
});

/** What the Judge has to do for a problem-round in this state, if anything. */
export type RoundWork = 'oracle' | 'plan' | 'judge' | null;

export function workOfRound(state: { matches(value: unknown): boolean }): RoundWork {
  if (state.matches({ awaitingOracle: 'unasked' })) return 'oracle';
  if (state.matches({ awaitingOracle: 'answered' })) return 'plan';
  if (state.matches({ awaitingExecutions: 'allIn' })) return 'judge';
  return null;
}
