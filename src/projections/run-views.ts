/**
 * The read models of a run, kept in runs/<run-id>/views.db while it runs and rebuilt from the
 * log by `crucible replay`. Each is a pure function of events; `replay --verify` compares their
 * state hashes with the live ones.
 */
import type { EventData } from '../events/catalog.js';
import { verdictOfCode } from '../core/verdicts.js';
import { del, put } from './readmodel.js';
import type { Projection, ReducerProjection, RowProjection } from './runner.js';
import { emptyRoundTable, reduceRoundTable, roundRows, type RoundTableState } from './round-table.js';
import { answerSelectionProjection } from './answer-selection-rows.js';

export { answerSelectionProjection };

export const roundTableProjection: ReducerProjection<RoundTableState> = {
  name: 'round-table',
  // 4: rewards kept per problem, summed in schedule order.
  version: 4,
  types: ['RunStarted', 'RoundStarted', 'TestsJudged', 'ProblemEvaluated', 'PolicyEvaluated', 'MistakeBookUpdated', 'RoundCompleted'],
  initial: emptyRoundTable,
  reduce: reduceRoundTable,
  tables: {
    rounds: {
      columns: {
        round: 'integer',
        problems: 'integer',
        held_out_pass: 'real',
        exact_correct: 'real?',
        validity: 'real?',
        exact_valid: 'real?',
        trained_correct: 'real?',
        trained_valid: 'real?',
        kill_rate: 'real?',
        mistake_book: 'integer?',
        code_reward: 'real',
        test_reward: 'real?',
        seconds: 'real?',
      },
      key: ['round'],
    },
  },
  rows: (state) => ({
    rounds: roundRows(state).map((r) => ({
      round: r.round,
      problems: r.problems,
      held_out_pass: r.heldOutPass,
      exact_correct: r.exactCorrect,
      validity: r.validity,
      exact_valid: r.exactValid,
      trained_correct: r.trainedCorrect,
      trained_valid: r.trainedValid,
      kill_rate: r.killRate,
      mistake_book: r.mistakeBook,
      code_reward: r.codeReward,
      test_reward: r.testReward,
      seconds: r.seconds,
    })),
  }),
};

/** The Mistake Book of every problem as it stands: one row per stored test. */
export const mistakeBookProjection: RowProjection = {
  name: 'mistake-book',
  version: 1,
  types: ['MistakeBookUpdated'],
  tables: {
    mistake_book: {
      columns: { problem_id: 'text', test_key: 'text', test_hash: 'text', count: 'integer', blacklisted: 'boolean', round: 'integer' },
      key: ['problem_id', 'test_key'],
    },
  },
  apply: (e) => {
    const d = e.data as EventData<'MistakeBookUpdated'>;
    return d.changes.map((c) => {
      const key = { problem_id: d.problemId, test_key: c.testKey };
      if (c.cause === 'blacklist') return put('mistake_book', { ...key, test_hash: c.testHash, count: 0, blacklisted: true, round: d.round });
      if (c.count <= 0) return del('mistake_book', key);
      return put('mistake_book', { ...key, test_hash: c.testHash, count: c.count, blacklisted: false, round: d.round });
    });
  },
};

/** Every reward with its advantage and components, per sample. */
export const rewardsProjection: RowProjection = {
  name: 'rewards',
  version: 2,
  types: ['RewardsAssigned'],
  tables: {
    rewards: {
      columns: { sample_id: 'text', role: 'text', round: 'integer', problem_id: 'text', reward_fn: 'text', reward: 'real', advantage: 'real', components: 'json' },
      // A sample can be rewarded again in a later round (TCS's buffer): one row per round.
      key: ['sample_id', 'role', 'round'],
      indexes: [['round', 'problem_id']],
    },
  },
  apply: (e) => {
    const d = e.data as EventData<'RewardsAssigned'>;
    return d.items.map((i) =>
      put('rewards', {
        sample_id: i.sampleId,
        role: d.role,
        round: d.round,
        problem_id: d.problemId,
        reward_fn: d.rewardFn,
        reward: i.reward,
        advantage: i.advantage,
        components: i.components,
      }),
    );
  },
};

/** The execution matrix as recorded: one verdict per (request, program, test). Compact
 * results name their request's pairs by position, so each request's pair lists are kept
 * beside in their stored form (each program and test once, pairs as index pairs): a program's
 * event then reads and parses a few kilobytes, not every pair of the request spelled out. */
export const executionsProjection: RowProjection = {
  name: 'executions',
  // 4: rows built from the stored lists directly and flushed many per statement (same rows).
  version: 4,
  types: ['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'],
  tables: {
    executions: {
      columns: { request_id: 'text', program_id: 'text', test_id: 'text', program_hash: 'text', test_hash: 'text', verdict: 'text', cached: 'boolean' },
      key: ['request_id', 'program_id', 'test_id'],
    },
    // body: the lists as JSON text in a fixed order (see storedBody): canonical JSON would
    // re-sort some kilobytes per request, more than the rest of the projection costs.
    execution_requests: { columns: { request_id: 'text', purpose: 'text', body: 'text' }, key: ['request_id'] },
  },
  apply: (e, view) => {
    if (e.type === 'ExecutionRequested') {
      const d = e.data as EventData<'ExecutionRequested'>;
      return [put('execution_requests', { request_id: d.requestId, purpose: d.purpose, body: storedBody(d) })];
    }
    if (e.type === 'ExecutionCompleted') return [executionRow(e.data as EventData<'ExecutionCompleted'>)];
    const d = e.data as EventData<'ProgramExecuted'>;
    const text = view.get('execution_requests', { request_id: d.requestId })?.body as string | undefined;
    // A result of a request this log never announced names no pairs.
    if (text === undefined) return [];
    // Rows straight from the stored lists and the compact arrays: no per-pair object between.
    const b = parsedBody(text);
    const size = b.pairs.length / 2;
    const cached = new Set(d.cached);
    return d.pairs.map((at, i) => {
      if (at >= size) throw new Error(`ProgramExecuted of ${d.requestId} names pair ${at}, but the request has ${size}`);
      const [programId, programHash] = b.programs[b.pairs[2 * at]!]!;
      const [testId, testHash] = b.tests[b.pairs[2 * at + 1]!]!;
      return put('executions', {
        request_id: d.requestId,
        program_id: programId,
        test_id: testId,
        program_hash: programHash,
        test_hash: testHash,
        verdict: verdictOfCode(d.verdicts[i]!),
        cached: cached.has(i),
      });
    });
  },
};

function executionRow(d: EventData<'ExecutionCompleted'>) {
  return put('executions', {
    request_id: d.requestId,
    program_id: d.programId,
    test_id: d.testId,
    program_hash: d.programHash,
    test_hash: d.testHash,
    verdict: d.verdict,
    cached: d.cached,
  });
}

interface StoredBody {
  programs: [string, string][];
  tests: [string, string][];
  pairs: number[];
}

/** The last few bodies parsed, by their text: each program's event of a request reads the
 * same body (a reward request's is tens of kilobytes). Pure: the text determines the value. */
const bodies = new Map<string, StoredBody>();
function parsedBody(text: string): StoredBody {
  let b = bodies.get(text);
  if (!b) {
    b = JSON.parse(text) as StoredBody;
    if (bodies.size >= 32) bodies.delete(bodies.keys().next().value!);
    bodies.set(text, b);
  }
  return b;
}

/** What execution_requests keeps of a request: the lists its results name by position, as
 * [id, hash] pairs so the text does not depend on the key order of the event data. */
function storedBody(d: EventData<'ExecutionRequested'>): string {
  return JSON.stringify({
    programs: d.programs.map((p) => [p.programId, p.programHash]),
    tests: d.tests.map((t) => [t.testId, t.testHash]),
    pairs: d.pairs,
  });
}

/** Policy versions and the checkpoints that hold them. */
export const policyVersionsProjection: RowProjection = {
  name: 'policy-versions',
  version: 1,
  types: ['PolicyVersionPublished'],
  tables: {
    policy_versions: {
      columns: { role: 'text', version: 'integer', name: 'text', round: 'integer', params_hash: 'text?' },
      key: ['role', 'version'],
    },
  },
  apply: (e) => {
    const d = e.data as EventData<'PolicyVersionPublished'>;
    return [put('policy_versions', { role: d.policy.role, version: d.policy.version, name: d.policy.name, round: d.round, params_hash: d.paramsHash })];
  },
};

export const RUN_PROJECTIONS: readonly Projection[] = [
  roundTableProjection,
  mistakeBookProjection,
  rewardsProjection,
  executionsProjection,
  policyVersionsProjection,
  answerSelectionProjection,
];
