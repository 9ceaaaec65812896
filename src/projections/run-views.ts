/**
 * The read models of a run, kept in runs/<run-id>/views.db while it runs and rebuilt from the
 * log by `crucible replay`. Each is a pure function of events; `replay --verify` compares their
 * state hashes with the live ones.
 */
import type { EventData } from '../events/catalog.js';
import { del, put, type TableSpec } from './readmodel.js';
import type { DatabaseOf } from './typed-sql.js';
import type { Projection, ReducerProjection, RowProjection } from './runner.js';
import { emptyRoundTable, reduceRoundTable, roundRows, type RoundRow, type RoundTableState } from './round-table.js';
import { answerSelectionProjection } from './answer-selection-rows.js';

/** A round of the round table as its read-model row (and `crucible export`'s `rounds` columns). */
export function roundRecord(r: RoundRow) {
  return {
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
  };
}

export { answerSelectionProjection };

export const roundTableProjection: ReducerProjection<RoundTableState> = {
  name: 'round-table',
  // 4: rewards kept per problem, summed in schedule order. 5: a round's seconds leave out the
  // time the run was stopped (RunResumed).
  version: 5,
  types: ['RunStarted', 'RunResumed', 'RoundStarted', 'TestsJudged', 'ProblemEvaluated', 'PolicyEvaluated', 'MistakeBookUpdated', 'RoundCompleted'],
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
    rounds: roundRows(state).map(roundRecord),
  }),
};

/** Tables of the row projections below, declared once: the projections write them, and readers
 * query them typed (`RunViewsDb`). */
const RUN_VIEW_TABLES = {
  mistake_book: {
    columns: { problem_id: 'text', test_key: 'text', test_hash: 'text', count: 'integer', blacklisted: 'boolean', round: 'integer' },
    key: ['problem_id', 'test_key'],
  },
  rewards: {
    columns: {
      sample_id: 'text',
      role: 'text',
      round: 'integer',
      problem_id: 'text',
      reward_fn: 'text',
      reward: 'real',
      advantage: 'real',
      components: 'json',
    },
    // A sample can be rewarded again in a later round (TCS's buffer): one row per round.
    key: ['sample_id', 'role', 'round'],
    indexes: [['round', 'problem_id']],
  },
  policy_versions: {
    columns: { role: 'text', version: 'integer', name: 'text', round: 'integer', params_hash: 'text?' },
    key: ['role', 'version'],
  },
} as const satisfies Readonly<Record<string, TableSpec>>;
export type RunViewsDb = DatabaseOf<typeof RUN_VIEW_TABLES>;

/** The Mistake Book of every problem as it stands: one row per stored test. */
export const mistakeBookProjection: RowProjection = {
  name: 'mistake-book',
  version: 1,
  types: ['MistakeBookUpdated'],
  tables: { mistake_book: RUN_VIEW_TABLES.mistake_book },
  apply: (e) => {
    const d = e.data as EventData<'MistakeBookUpdated'>;
    // Rows as literals, not spreads of a key object: a step changes tens of thousands of them.
    return d.changes.map((c) => {
      if (c.cause !== 'blacklist' && c.count <= 0) return del('mistake_book', { problem_id: d.problemId, test_key: c.testKey });
      const blacklisted = c.cause === 'blacklist';
      return put('mistake_book', {
        problem_id: d.problemId,
        test_key: c.testKey,
        test_hash: c.testHash,
        count: blacklisted ? 0 : c.count,
        blacklisted,
        round: d.round,
      });
    });
  },
};

/** Every reward with its advantage and components, per sample. */
export const rewardsProjection: RowProjection = {
  name: 'rewards',
  version: 2,
  types: ['RewardsAssigned'],
  tables: { rewards: RUN_VIEW_TABLES.rewards },
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

/** Policy versions and the checkpoints that hold them. */
export const policyVersionsProjection: RowProjection = {
  name: 'policy-versions',
  version: 1,
  types: ['PolicyVersionPublished'],
  tables: { policy_versions: RUN_VIEW_TABLES.policy_versions },
  apply: (e) => {
    const d = e.data as EventData<'PolicyVersionPublished'>;
    return [put('policy_versions', { role: d.policy.role, version: d.policy.version, name: d.policy.name, round: d.round, params_hash: d.paramsHash })];
  },
};

/** Read models of a run that this version no longer builds, dropped from a run's views.db when
 * it is opened (RunnerOptions.retired): the executions read model, which nothing read (answer
 * selection keeps the requests' lists it needs; `crucible export` reads executions from the log). */
export const RETIRED_RUN_PROJECTIONS: readonly string[] = ['executions'];

/** The read models a run keeps up to date as it goes (views.db): small, and read while it runs. */
export const KEPT_RUN_PROJECTIONS: readonly Projection[] = [roundTableProjection, mistakeBookProjection, rewardsProjection, policyVersionsProjection];

/**
 * Read models built when something reads them (`crucible report`, `runs`, `export`, `replay`),
 * not by the run's loop: brought up to date from their checkpoint in views.db by the reader and
 * kept there, so a later reader only reads what the log gained since. Answer selection is read
 * by reports only, and keeping it was most of what the loop wrote beside the log: it keeps every
 * request's lists to find reused verdicts (`bench scale --fraction 0.05`, one run after the
 * other: 565 bytes written to storage per result with it kept by the loop, 440 without it; the
 * loop's CPU 92.4 against 86.4 us per result).
 */
export const ON_DEMAND_RUN_PROJECTIONS: readonly Projection[] = [answerSelectionProjection];

/** Every read model of a run: what a replay rebuilds and a report reads. */
export const RUN_PROJECTIONS: readonly Projection[] = [...KEPT_RUN_PROJECTIONS, ...ON_DEMAND_RUN_PROJECTIONS];
