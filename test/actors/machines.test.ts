/**
 * Each actor's logic on its own: its machine folded over hand-made log events by the fold the
 * runtime uses (ActorFold: no log, no runtime, no effects), and its `pending` read from the
 * snapshot after each step.
 */
import { asPosition } from '../../src/events/log.js';
import { describe, expect, it } from 'vitest';
import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import { ActorFold } from '../../src/actors/actor-fold.js';
import { makeEvent, type EventDataInput, type EventType, requestBody, requestSize } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { parseConfig } from '../../src/config/load.js';
import { conductor, conductorMachine, problemsForRound } from '../../src/actors/conductor.js';
import { solver, solverMachine } from '../../src/actors/solver.js';
import { adversary, adversaryMachine } from '../../src/actors/adversary.js';
import { executor, executorMachine } from '../../src/actors/executor.js';
import { judgeMachine, judgePending, openRounds } from '../../src/actors/judge.js';
import { learnerMachine, learnerPending, shuffledAdvantageSources } from '../../src/actors/learner.js';

const H = (c: string) => c.repeat(64);
let position = 0;

/** A stored event as the log would hand it over (data validated by the catalog). */
function ev<T extends EventType>(type: T, data: EventDataInput<T>): EventEnvelope {
  const made = makeEvent(type, 'run-1', data);
  position++;
  return {
    id: `e${position}`,
    type,
    v: 1,
    runId: 'run-1',
    stream: 'test',
    position: asPosition(position),
    commitId: `c${position}`,
    causationId: null,
    correlationId: null,
    at: new Date(0).toISOString(),
    data: made.data,
  };
}

/** The fold each snapshot came from, so a test goes on from the snapshot it holds. */
const folds = new WeakMap<object, ActorFold<AnyStateMachine>>();

/** Folds events into a fresh machine, or on from a snapshot this helper returned (the latest of
 * its fold). A machine that throws fails the test (FoldError). */
function fold<M extends AnyStateMachine>(machine: M, events: EventEnvelope[], from?: SnapshotFrom<M>): SnapshotFrom<M> {
  const f = from === undefined ? new ActorFold<AnyStateMachine>(machine) : folds.get(from);
  if (!f || (from !== undefined && f.snapshot !== from)) throw new Error('fold goes on from the latest snapshot of its fold only');
  for (const envelope of events) f.fold(envelope);
  folds.set(f.snapshot, f);
  return f.snapshot as SnapshotFrom<M>;
}

const config = (over: Record<string, unknown> = {}) =>
  parseConfig({ rounds: 2, sampling: { problemsPerRound: 2, groupSize: 1, suitesPerProgram: 2, suiteSize: 2, whiteBox: false }, ...over });

const runStarted = (over: Record<string, unknown> = {}, problems = ['p1', 'p2']) =>
  ev('RunStarted', {
    method: 'code-a1',
    config: config(over),
    configHash: H('c'),
    seed: 1,
    crucibleVersion: '0.1.0',
    problems: problems.map((problemId, i) => ({ problemId, problemHash: H(String(i)) })),
  });
const published = (role: 'code' | 'test', version: number, round: number) =>
  ev('PolicyVersionPublished', { round, policy: { role, name: `catalog-${role}`, version }, checkpoint: H('f'), paramsHash: H('f') });
const scheduled = (round: number, problemId: string, codeVersion = 0, testVersion = 0, whiteBox = false) =>
  ev('ProblemScheduled', { round, problemId, problemHash: H('1'), groupSize: 1, whiteBox, codeVersion, testVersion });
const sampledSolution = (round: number, problemId: string, solutionId: string) =>
  ev('SolutionSampled', {
    round,
    problemId,
    solutionId,
    programHash: H('a'),
    policy: { role: 'code', name: 'catalog-code', version: 0 },
    sampling: { seed: 1, index: 0, temperature: null, candidateId: 'ref', contextKey: problemId },
    responseHash: null,
  });
const sampledSuite = (round: number, problemId: string, solutionId: string, suiteId: string) =>
  ev('TestsSampled', {
    round,
    problemId,
    suiteId,
    targetSolutionId: solutionId,
    policy: { role: 'test', name: 'catalog-test', version: 0 },
    sampling: { seed: 1, index: 0, temperature: null, candidateId: 't:1', contextKey: problemId },
    responseHash: null,
    nonprintableRatio: 0,
    tests: [{ testId: `${suiteId}/0`, testHash: H('b'), wellFormed: true, reason: null }],
  });
const requested = (round: number, problemId: string, purpose: 'oracle' | 'reward' | 'heldout' | 'kill', pairs = 1) =>
  ev('ExecutionRequested', {
    round,
    problemId,
    requestId: `${round}/${problemId}/${purpose}`,
    purpose,
    ...requestBody(Array.from({ length: pairs }, (_, i) => ({ programId: `s${i}`, programHash: H('a'), testId: `t${i}`, testHash: H('b') }))),
  });
const completed = (requestId: string) =>
  ev('ProgramExecuted', {
    requestId,
    programHash: H('a'),
    pairs: [0],
    verdicts: 'A',
    timeMs: [1],
    memoryKb: [1],
    outputs: {},
    exceptions: {},
    cached: [],
    isolated: true,
    load: 'ran',
  });
const evaluated = (round: number, problemId: string) =>
  ev('ProblemEvaluated', {
    round,
    problemId,
    heldOut: { programs: 1, passed: 1 },
    kill: { targets: 1, suites: 2, killed: 1 },
    tests: { sampled: 2, wellFormed: 2, valid: 2 },
    mistakeBook: { size: 0 },
    rewards: { code: 1, test: 1 },
  });
const rewards = (round: number, problemId: string, role: 'code' | 'test') =>
  ev('RewardsAssigned', { round, problemId, role, rewardFn: 'code-a1/v1', items: [{ sampleId: `${problemId}/s0`, reward: 1, advantage: 0, components: {} }] });

describe('conductor', () => {
  it('waits for the run and both initial policies before starting round 1', () => {
    let s = fold(conductorMachine, []);
    expect(conductor.pending(s)).toEqual([]);
    s = fold(conductorMachine, [runStarted()], s);
    expect(s.value).toBe('running');
    expect(conductor.pending(s)).toEqual([]);
    s = fold(conductorMachine, [published('code', 0, 0)], s);
    expect(conductor.pending(s)).toEqual([]);
    s = fold(conductorMachine, [published('test', 0, 0)], s);
    expect(conductor.pending(s)).toEqual([{ key: 'round/1/start', kind: 'start-round', round: 1 }]);
  });

  it('completes a round only when every problem is judged and both roles are trained on it; the last round ends the run', () => {
    let s = fold(conductorMachine, [
      runStarted(),
      published('code', 0, 0),
      published('test', 0, 0),
      ev('RoundStarted', { round: 1, problemIds: ['p1', 'p2'] }),
    ]);
    expect(conductor.pending(s)).toEqual([]);
    // A repeated evaluation, or one of another round, counts for nothing.
    s = fold(conductorMachine, [evaluated(1, 'p1'), evaluated(1, 'p1'), evaluated(0, 'p2')], s);
    expect(s.context.judged).toEqual(['p1']);
    s = fold(conductorMachine, [evaluated(1, 'p2')], s);
    expect(conductor.pending(s)).toEqual([]);
    s = fold(conductorMachine, [published('code', 1, 1)], s);
    expect(conductor.pending(s)).toEqual([]);
    s = fold(conductorMachine, [published('test', 1, 1)], s);
    expect(conductor.pending(s)).toEqual([{ key: 'round/1/complete', kind: 'complete-round', round: 1, last: false }]);
    s = fold(conductorMachine, [ev('RoundCompleted', { round: 1 })], s);
    expect(conductor.pending(s)).toEqual([{ key: 'round/2/start', kind: 'start-round', round: 2 }]);
    s = fold(
      conductorMachine,
      [ev('RoundStarted', { round: 2, problemIds: ['p1', 'p2'] }), evaluated(2, 'p1'), evaluated(2, 'p2'), published('code', 2, 2), published('test', 2, 2)],
      s,
    );
    expect(conductor.pending(s)).toEqual([{ key: 'round/2/complete', kind: 'complete-round', round: 2, last: true }]);
    s = fold(conductorMachine, [ev('RoundCompleted', { round: 2 }), ev('RunCompleted', { rounds: 2 })], s);
    expect(s.status).toBe('done');
    expect(conductor.pending(s)).toEqual([]);
  });

  it('schedules rounds by rotating over the problems', () => {
    const s = fold(conductorMachine, [runStarted({ sampling: { problemsPerRound: 2 } }, ['a', 'b', 'c'])]);
    expect(problemsForRound(s.context, 1).map((p) => p.problemId)).toEqual(['a', 'b']);
    expect(problemsForRound(s.context, 2).map((p) => p.problemId)).toEqual(['c', 'a']);
  });
});

describe('solver', () => {
  it('has one job per scheduled problem-round, at the version the Conductor named, done by its samples', () => {
    let s = fold(solverMachine, [scheduled(1, 'p1', 3), scheduled(1, 'p2', 3)]);
    expect(solver.pending(s)).toEqual([
      { key: '1/p1', round: 1, problemId: 'p1', groupSize: 1, version: 3 },
      { key: '1/p2', round: 1, problemId: 'p2', groupSize: 1, version: 3 },
    ]);
    s = fold(solverMachine, [sampledSolution(1, 'p2', 's1')], s);
    expect(solver.pending(s).map((j) => j.key)).toEqual(['1/p1']);
    // A sample of another round finishes nothing of this one.
    s = fold(solverMachine, [sampledSolution(2, 'p1', 's2')], s);
    expect(solver.pending(s).map((j) => j.key)).toEqual(['1/p1']);
  });
});

describe('adversary', () => {
  it('attacks each sampled program of a scheduled problem at the test version named, until its suites are in', () => {
    let s = fold(adversaryMachine, [sampledSolution(1, 'p1', 'orphan')]);
    expect(adversary.pending(s)).toEqual([]);
    s = fold(adversaryMachine, [scheduled(1, 'p1', 0, 4, true), sampledSolution(1, 'p1', 's1'), sampledSolution(1, 'p1', 's2')], s);
    expect(adversary.pending(s)).toEqual([
      { key: 's1', round: 1, problemId: 'p1', solutionId: 's1', programHash: H('a'), candidateId: 'ref', whiteBox: true, version: 4 },
      { key: 's2', round: 1, problemId: 'p1', solutionId: 's2', programHash: H('a'), candidateId: 'ref', whiteBox: true, version: 4 },
    ]);
    s = fold(adversaryMachine, [sampledSuite(1, 'p1', 's1', 's1/t0')], s);
    expect(adversary.pending(s).map((j) => j.key)).toEqual(['s2']);
  });
});

describe('executor', () => {
  it('runs each request with pairs once; an empty request is no work', () => {
    let s = fold(executorMachine, [requested(1, 'p1', 'oracle', 0)]);
    expect(executor.pending(s)).toEqual([]);
    s = fold(executorMachine, [requested(1, 'p1', 'reward', 2), requested(1, 'p1', 'kill', 1)], s);
    expect(executor.pending(s).map((r) => [r.key, requestSize(r)])).toEqual([
      ['1/p1/reward', 2],
      ['1/p1/kill', 1],
    ]);
    s = fold(executorMachine, [completed('1/p1/reward')], s);
    expect(executor.pending(s).map((r) => r.key)).toEqual(['1/p1/kill']);
  });
});

/** The state of an open problem-round's actor (undefined: not open). */
const roundState = (s: SnapshotFrom<typeof judgeMachine>, k: string) =>
  (s.children[k] as { getSnapshot(): { value: unknown } } | undefined)?.getSnapshot().value;

describe('judge', () => {
  it('oracle when every suite is sampled, plan when the oracle is in, judge when every verdict is in', () => {
    let s = fold(judgeMachine, [runStarted(), scheduled(1, 'p1'), sampledSolution(1, 'p1', 's1'), sampledSuite(1, 'p1', 's1', 's1/t0')]);
    expect(judgePending(s)).toEqual([]);
    expect(roundState(s, '1/p1')).toBe('sampling');
    s = fold(judgeMachine, [sampledSuite(1, 'p1', 's1', 's1/t1')], s);
    expect(judgePending(s).map((e) => [e.key, e.kind])).toEqual([['1/p1/oracle', 'oracle']]);
    expect(roundState(s, '1/p1')).toEqual({ awaitingOracle: 'unasked' });
    s = fold(judgeMachine, [requested(1, 'p1', 'oracle')], s);
    expect(judgePending(s)).toEqual([]);
    expect(roundState(s, '1/p1')).toEqual({ awaitingOracle: 'asked' });
    s = fold(judgeMachine, [completed('1/p1/oracle')], s);
    expect(judgePending(s).map((e) => [e.key, e.kind])).toEqual([['1/p1/plan', 'plan']]);
    expect(roundState(s, '1/p1')).toEqual({ awaitingOracle: 'answered' });
    s = fold(
      judgeMachine,
      [
        ev('TestsJudged', {
          round: 1,
          problemId: 'p1',
          tests: [{ testId: 's1/t0/0', testHash: H('b'), valid: true, reason: 'ok', status: 'valid', oracleHash: H('d') }],
        }),
        requested(1, 'p1', 'reward'),
        requested(1, 'p1', 'heldout'),
        requested(1, 'p1', 'kill', 0),
      ],
      s,
    );
    expect(judgePending(s)).toEqual([]);
    expect(roundState(s, '1/p1')).toEqual({ awaitingExecutions: 'running' });
    s = fold(judgeMachine, [completed('1/p1/reward')], s);
    expect(judgePending(s)).toEqual([]);
    s = fold(judgeMachine, [completed('1/p1/heldout')], s);
    expect(roundState(s, '1/p1')).toEqual({ awaitingExecutions: 'allIn' });
    const [judge] = judgePending(s);
    expect(judge?.kind).toBe('judge');
    expect(judge?.problem.judgedTests).toHaveLength(1);
    s = fold(judgeMachine, [evaluated(1, 'p1')], s);
    expect(judgePending(s)).toEqual([]);
    expect(openRounds(s)).toEqual([]);
    expect(s.children).toEqual({});
  });

  it('keeps each problem-round apart and folds Mistake Book changes per problem', () => {
    let s = fold(judgeMachine, [
      runStarted({ sampling: { suitesPerProgram: 1, groupSize: 1 } }),
      scheduled(1, 'p1'),
      scheduled(1, 'p2'),
      sampledSolution(1, 'p2', 's1'),
      sampledSuite(1, 'p2', 's1', 's1/t0'),
    ]);
    expect(judgePending(s).map((e) => e.key)).toEqual(['1/p2/oracle']);
    s = fold(
      judgeMachine,
      [ev('MistakeBookUpdated', { round: 1, problemId: 'p2', changes: [{ testKey: 'k', testHash: H('b'), delta: 1, count: 1, cause: 'fail' }] })],
      s,
    );
    expect(Object.keys(s.context.mistakeBooks)).toEqual(['p2']);
  });
});

describe('learner', () => {
  it('publishes the initial policies once the run starts, then trains a round when both roles are rewarded on every problem', () => {
    let s = fold(learnerMachine, []);
    expect(learnerPending(s)).toEqual([]);
    expect(s.value).toBe('waiting');
    s = fold(learnerMachine, [runStarted()], s);
    expect(learnerPending(s)).toEqual([{ key: 'init', kind: 'init' }]);
    expect(s.value).toBe('initializing');
    s = fold(learnerMachine, [published('code', 0, 0), published('test', 0, 0), ev('RoundStarted', { round: 1, problemIds: ['p1', 'p2'] })], s);
    expect(learnerPending(s)).toEqual([]);
    expect(s.value).toBe('collecting');
    s = fold(learnerMachine, [rewards(1, 'p1', 'code'), rewards(1, 'p1', 'test'), rewards(1, 'p2', 'code')], s);
    expect(learnerPending(s)).toEqual([]);
    s = fold(learnerMachine, [rewards(1, 'p2', 'test')], s);
    expect(learnerPending(s)).toEqual([{ key: 'train/1', kind: 'train', round: 1 }]);
    expect(s.value).toBe('training');
    // Both roles are published in one commit, test last: only then is the round trained.
    s = fold(learnerMachine, [published('code', 1, 1)], s);
    expect(learnerPending(s)).toEqual([{ key: 'train/1', kind: 'train', round: 1 }]);
    s = fold(learnerMachine, [published('test', 1, 1)], s);
    expect(learnerPending(s)).toEqual([]);
    expect(s.value).toBe('collecting');
    expect(s.context.trainedRounds).toEqual([1]);
    expect(s.context.versions).toEqual({ code: 1, test: 1 });
  });

  it('trains one round at a time, oldest first', () => {
    const s = fold(learnerMachine, [
      runStarted(),
      published('code', 0, 0),
      published('test', 0, 0),
      ev('RoundStarted', { round: 2, problemIds: ['p1'] }),
      rewards(2, 'p1', 'code'),
      rewards(2, 'p1', 'test'),
      ev('RoundStarted', { round: 1, problemIds: ['p1'] }),
      rewards(1, 'p1', 'code'),
      rewards(1, 'p1', 'test'),
    ]);
    expect(learnerPending(s)).toEqual([{ key: 'train/1', kind: 'train', round: 1 }]);
  });

  it('shuffled control: advantages move only within their group, by a seeded permutation', () => {
    const from = shuffledAdvantageSources([3, 0, 4], (g) => 100 + g);
    expect(from).toHaveLength(7);
    expect(from.slice(0, 3).sort()).toEqual([0, 1, 2]);
    expect(from.slice(3).sort()).toEqual([3, 4, 5, 6]);
    expect(shuffledAdvantageSources([3, 0, 4], (g) => 100 + g)).toEqual(from);
    // Another seed gives another permutation somewhere over many groups.
    const many = Array.from({ length: 20 }, () => 5);
    expect(shuffledAdvantageSources(many, (g) => g)).not.toEqual(shuffledAdvantageSources(many, (g) => g + 1000));
  });
});
