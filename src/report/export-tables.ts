/**
 * The tables `crucible export` writes of a run, each declared once (its columns, their types and
 * meanings: docs/export.md lists the same) with the rows it takes from the run: the round table,
 * rewards and the run itself from the read models and the run's summary; the histories the read
 * models do not keep (every Mistake Book change, every execution with its time and memory, every
 * sample, sampled test and training step) from the log's events, streamed in log order.
 */
import type Database from 'better-sqlite3';
import { requestPairs, type EventData } from '../events/catalog.js';
import { pairResultsOf } from '../events/program-executed.js';
import type { EventEnvelope } from '../events/envelope.js';
import { roundRecord, type RunViewsDb } from '../projections/run-views.js';
import { all, queryBuilder } from '../projections/typed-sql.js';
import type { ColumnSpec, ColumnType, Row, TableSpec } from './parquet-table.js';
import type { RunSummary } from './run-data.js';

/** What the tables are read from: the run's log (events of the run, in log order), its read
 * models and its summary. */
export interface RunSource {
  events(types: readonly string[]): AsyncIterable<EventEnvelope>;
  db: Database.Database;
  summary: RunSummary;
  started: EventData<'RunStarted'>;
}

export interface ExportTable extends TableSpec {
  rows(run: RunSource): AsyncIterable<Row> | Iterable<Row>;
}

const col = (name: string, type: ColumnType, doc: string, nullable = false): ColumnSpec => ({ name, type, nullable, doc });
const RUN_ID = col(
  'run_id',
  'string',
  'The run id (`<config name>-s<seed>-<config hash>`, the name of its directory); the same in every row, so that tables of several runs can be concatenated.',
);
const ROUND = col('round', 'int32', 'The round, from 1.');
const PROBLEM = col('problem_id', 'string', 'The problem, `<source>/<id>` (e.g. `demo/balanced-brackets`).');
const ROLE = col('role', 'string', "`code` (the Solver's policy) or `test` (the Adversary's).");

const views = queryBuilder<RunViewsDb>();

const runTable: ExportTable = {
  name: 'run',
  doc: 'One row: the run, its config and how it ended.',
  columns: [
    RUN_ID,
    col('name', 'string', "The config's name."),
    col('method', 'string', 'The method (`code-a1`, `cure`, `tcs`, `evolvecoder`, `ace`, `golden-tests`, `self-play`).'),
    col('seed', 'int64', 'The run seed.'),
    col('status', 'string', '`finished`, `failed` or `unfinished` (no RunCompleted or RunFailed in the log yet).'),
    col('failure', 'string', 'Why the run failed; null unless `status` is `failed`.', true),
    col('planned_rounds', 'int32', 'Rounds the config asks for; null when the recorded config does not say.', true),
    col('rounds', 'int32', 'Rounds completed (the rows of `rounds`).'),
    col('config_hash', 'string', 'sha256 of the resolved config.'),
    col('crucible_version', 'string', 'The crucible version that started the run.'),
    col('config', 'json', 'The resolved config (every default filled in), as JSON.'),
  ],
  rows: ({ summary, started }) => [
    {
      run_id: summary.runId,
      name: summary.name,
      method: summary.method,
      seed: summary.seed,
      status: summary.status,
      failure: summary.failure,
      planned_rounds: summary.plannedRounds,
      rounds: summary.rows.length,
      config_hash: started.configHash,
      crucible_version: started.crucibleVersion,
      config: started.config,
    },
  ],
};

const roundsTable: ExportTable = {
  name: 'rounds',
  doc: 'One row per completed round: the round table `crucible run` prints (docs/demo.md defines each figure).',
  columns: [
    RUN_ID,
    ROUND,
    col('problems', 'int32', 'Problems judged in the round.'),
    col('held_out_pass', 'double', "Share of the round's sampled programs passing every held-out official test."),
    col(
      'exact_correct',
      'double',
      'Exact probability that the code policy that drew the round samples a correct program (mean over problems); null where the policy cannot tell.',
      true,
    ),
    col('validity', 'double', 'Share of generated tests judged valid against the reference; null when the round judged none.', true),
    col('exact_valid', 'double', "Exact probability that a test drawn from the round's test policy is valid; null as `exact_correct`.", true),
    col('trained_correct', 'double', "`exact_correct` of the policy the round's training step made.", true),
    col('trained_valid', 'double', "`exact_valid` of the policy the round's training step made.", true),
    col(
      'kill_rate',
      'double',
      "Share of (suite, known-incorrect program) pairs where the suite's valid tests fail the program; null without judged tests or known-incorrect programs.",
      true,
    ),
    col('mistake_book', 'int32', 'Tests in the Mistake Book over all problems at the end of the round; null for a run that keeps none.', true),
    col('code_reward', 'double', "Mean code reward over the round's problems."),
    col('test_reward', 'double', 'Mean test reward; null when no generated test was judged.', true),
    col('seconds', 'double', 'Wall time of the round, less any time the run was stopped (informational).', true),
  ],
  rows: ({ summary }) => summary.rows.map((r) => ({ run_id: summary.runId, ...roundRecord(r) })),
};

const rewardsTable: ExportTable = {
  name: 'rewards',
  doc: "One row per rewarded sample and round (a sample rewarded again in a later round, as TCS's buffer does, has a row per round): the rewards read model.",
  columns: [
    RUN_ID,
    ROUND,
    PROBLEM,
    ROLE,
    col('sample_id', 'string', "The sample: a program's `solution_id` (role `code`) or a suite's `suite_id` (role `test`), as in `samples.sample_id`."),
    col('reward_fn', 'string', 'The reward function and its version, e.g. `code-a1/v1`.'),
    col('reward', 'double', 'The reward.'),
    col('advantage', 'double', 'The GRPO advantage the Learner trains with.'),
    col('components', 'json', "The reward's components by name (the method's terms, e.g. `genPass`, `histPass`), as a JSON object of numbers."),
  ],
  rows: ({ db, summary }) =>
    all(db, views.selectFrom('rewards').selectAll().orderBy('round').orderBy('problem_id').orderBy('role').orderBy('sample_id')).map((r) => ({
      run_id: summary.runId,
      round: r.round,
      problem_id: r.problem_id,
      role: r.role,
      sample_id: r.sample_id,
      reward_fn: r.reward_fn,
      reward: r.reward,
      advantage: r.advantage,
      components: JSON.parse(r.components) as unknown,
    })),
};

type Requested = EventData<'ExecutionRequested'>;

const executionsTable: ExportTable = {
  name: 'executions',
  doc: 'One row per executed (program, test) pair of an execution request, in log order; pairs a request answered from verdicts recorded before are not executions and have no row.',
  columns: [
    RUN_ID,
    ROUND,
    PROBLEM,
    col('request_id', 'string', 'The execution request.'),
    col(
      'purpose',
      'string',
      'Why the Judge asked: `oracle` (tests on the reference), `reward`, `mistake-book`, `heldout` (official tests), `kill` (known-incorrect programs), `load` (older logs).',
    ),
    col('program_id', 'string', "The program in the request: a `solution_id`, `reference`, or a known-incorrect program's id."),
    col('program_hash', 'string', "sha256 of the program's text (a blob of the run's log)."),
    col('test_id', 'string', "The test in the request: a sampled test's `test_id`, a Mistake Book or official test."),
    col('test_hash', 'string', "sha256 of the test's text."),
    col('verdict', 'string', '`accepted`, `wrong_answer`, `runtime_error`, `time_limit`, `memory_limit`, `output_limit`, `compile_error` or `sandbox_error`.'),
    col('time_ms', 'double', 'CPU time of the run, milliseconds.'),
    col('memory_kb', 'double', 'Peak memory, KiB.'),
    col('exception_type', 'string', "The exception's type, for a run that raised; else null.", true),
    col('output_hash', 'string', "sha256 of the program's output, where the sandbox kept it; else null.", true),
    col('cached', 'boolean', 'True when the verdict was copied from an earlier execution of the same program and test.'),
    col('isolated', 'boolean', 'False when the run had rlimits only (no bubblewrap).'),
    col('load', 'string', "How the program's module body went: `ran`, `raised`, `compile_error` or `unknown`; null in older logs.", true),
  ],
  async *rows({ events, summary }) {
    // The pairs of each request, until its executions are read (they follow it in the log).
    const requests = new Map<string, Requested>();
    const pairsOf = new Map<string, ReturnType<typeof requestPairs>>();
    const base = (d: Requested) => ({ run_id: summary.runId, round: d.round, problem_id: d.problemId, request_id: d.requestId, purpose: d.purpose });
    for await (const e of events(['ExecutionRequested', 'ProgramExecuted', 'ExecutionCompleted'])) {
      if (e.type === 'ExecutionRequested') {
        const d = e.data as Requested;
        requests.set(d.requestId, d);
        pairsOf.set(d.requestId, requestPairs(d));
        continue;
      }
      // The event's own codec (program-executed.ts) expands a program's compact results.
      const load = e.type === 'ProgramExecuted' ? (e.data as EventData<'ProgramExecuted'>).load : null;
      for (const r of pairResultsOf(e, (id) => pairsOf.get(id))) {
        const req = requests.get(r.requestId);
        if (!req) continue;
        yield {
          ...base(req),
          program_id: r.programId,
          program_hash: r.programHash,
          test_id: r.testId,
          test_hash: r.testHash,
          verdict: r.verdict,
          time_ms: r.timeMs,
          memory_kb: r.memoryKb,
          exception_type: r.exceptionType,
          output_hash: r.outputHash,
          cached: r.cached,
          isolated: r.isolated,
          load,
        };
      }
    }
  },
};

const mistakeBookTable: ExportTable = {
  name: 'mistake_book',
  doc: "One row per change to a problem's Mistake Book, in the order the Judge made them. Folding them gives the book at any point: a test's last change with `count` above 0 is in the book (the `mistake_book` figure of `rounds` counts those at the end of each round); a `blacklist` change (count 0) keeps the test out for good.",
  columns: [
    RUN_ID,
    col('change', 'int32', "The change's place in the run's history, from 0."),
    ROUND,
    PROBLEM,
    col('test_key', 'string', "The test's key in the book (its canonical JSON: tests that differ only in form share one)."),
    col('test_hash', 'string', "sha256 of the test's text."),
    col('delta', 'int32', 'The change of the count.'),
    col('count', 'int32', 'The count after the change; 0 removes the test from the book.'),
    col('cause', 'string', '`fail` (a sampled program failed it), `pass`, `decay`, `cap` (over the size cap) or `blacklist`.'),
  ],
  async *rows({ events, summary }) {
    let change = 0;
    for await (const e of events(['MistakeBookUpdated'])) {
      const d = e.data as EventData<'MistakeBookUpdated'>;
      for (const c of d.changes) {
        yield {
          run_id: summary.runId,
          change: change++,
          round: d.round,
          problem_id: d.problemId,
          test_key: c.testKey,
          test_hash: c.testHash,
          delta: c.delta,
          count: c.count,
          cause: c.cause,
        };
      }
    }
  },
};

const samplesTable: ExportTable = {
  name: 'samples',
  doc: 'One row per sample, in log order: each program the Solver drew (role `code`) and each test suite the Adversary drew (role `test`; its tests are in `tests`).',
  columns: [
    RUN_ID,
    ROUND,
    PROBLEM,
    ROLE,
    col('sample_id', 'string', "The sample: a program's solution id or a suite's id."),
    col('policy', 'string', 'The policy that drew it.'),
    col('policy_version', 'int32', 'Its version (0: the initial policy).'),
    col('seed', 'int64', 'The seed the sample was drawn with.'),
    col('sample_index', 'int32', 'Its index within its group.'),
    col('temperature', 'double', 'Sampling temperature; null when the policy does not expose one.', true),
    col('candidate_id', 'string', 'The catalog candidate(s) drawn (offline demo policies); else null.', true),
    col('response_hash', 'string', 'sha256 of the raw model response it was read from; null when there was none.', true),
    col('program_hash', 'string', "Role `code`: sha256 of the program's text; null for suites.", true),
    col('target_solution_id', 'string', 'Role `test`: the program the Adversary saw (white-box); null for black-box suites and for programs.', true),
    col('suite_size', 'int32', 'Role `test`: tests in the suite; null for programs.', true),
    col('well_formed_tests', 'int32', 'Role `test`: tests of the suite that parsed; null for programs.', true),
    col('nonprintable_ratio', 'double', 'Role `test`: share of non-printable characters in the response; null for programs.', true),
  ],
  async *rows({ events, summary }) {
    for await (const e of events(['SolutionSampled', 'TestsSampled'])) {
      if (e.type === 'SolutionSampled') {
        const d = e.data as EventData<'SolutionSampled'>;
        yield {
          run_id: summary.runId,
          round: d.round,
          problem_id: d.problemId,
          role: 'code',
          sample_id: d.solutionId,
          policy: d.policy.name,
          policy_version: d.policy.version,
          seed: d.sampling.seed,
          sample_index: d.sampling.index,
          temperature: d.sampling.temperature,
          candidate_id: d.sampling.candidateId,
          response_hash: d.responseHash,
          program_hash: d.programHash,
          target_solution_id: null,
          suite_size: null,
          well_formed_tests: null,
          nonprintable_ratio: null,
        };
      } else {
        const d = e.data as EventData<'TestsSampled'>;
        yield {
          run_id: summary.runId,
          round: d.round,
          problem_id: d.problemId,
          role: 'test',
          sample_id: d.suiteId,
          policy: d.policy.name,
          policy_version: d.policy.version,
          seed: d.sampling.seed,
          sample_index: d.sampling.index,
          temperature: d.sampling.temperature,
          candidate_id: d.sampling.candidateId,
          response_hash: d.responseHash,
          program_hash: null,
          target_solution_id: d.targetSolutionId,
          suite_size: d.tests.length,
          well_formed_tests: d.tests.filter((t) => t.wellFormed).length,
          nonprintable_ratio: d.nonprintableRatio,
        };
      }
    }
  },
};

type Judged = EventData<'TestsJudged'>['tests'][number];

const testsTable: ExportTable = {
  name: 'tests',
  doc: 'One row per test of a sampled suite, in log order, with how the Judge judged it against the reference in the same round.',
  columns: [
    RUN_ID,
    ROUND,
    PROBLEM,
    col('suite_id', 'string', 'The suite (`samples.sample_id` of role `test`).'),
    col('test_id', 'string', 'The test (`executions.test_id`).'),
    col('test_hash', 'string', "sha256 of the test's text."),
    col('well_formed', 'boolean', 'Whether the test parsed.'),
    col('parse_error', 'string', 'Why it did not parse; null when it did.', true),
    col(
      'valid',
      'boolean',
      'Judged valid against the reference; null when the Judge judged no test of the round (methods without generated-test judging).',
      true,
    ),
    col(
      'judged',
      'string',
      "The Judge's reason: `ok`, `malformed`, `no-expected`, `duplicate`, `reference-raises`, `reference-timeout`, `expected-mismatch`, `reference-sandbox-error`; null as `valid`.",
      true,
    ),
    col(
      'status',
      'string',
      "`valid`, `corrected` (its stated expectation was wrong; the reference's output is used), `invalid` or `unknown`; null as `valid`.",
      true,
    ),
    col('oracle_hash', 'string', "sha256 of the test corrected to the reference's output, when usable; else null.", true),
  ],
  async *rows({ events, summary }) {
    // Judgements come after the suites they judge: read them first, keyed by round and test.
    const judged = new Map<string, Judged>();
    for await (const e of events(['TestsJudged'])) {
      const d = e.data as EventData<'TestsJudged'>;
      for (const t of d.tests) judged.set(`${d.round}\u0000${t.testId}`, t);
    }
    for await (const e of events(['TestsSampled'])) {
      const d = e.data as EventData<'TestsSampled'>;
      for (const t of d.tests) {
        const j = judged.get(`${d.round}\u0000${t.testId}`);
        yield {
          run_id: summary.runId,
          round: d.round,
          problem_id: d.problemId,
          suite_id: d.suiteId,
          test_id: t.testId,
          test_hash: t.testHash,
          well_formed: t.wellFormed,
          parse_error: t.reason,
          valid: j?.valid ?? null,
          judged: j?.reason ?? null,
          status: j?.status ?? null,
          oracle_hash: j?.oracleHash ?? null,
        };
      }
    }
  },
};

type Batch = EventData<'TrainingBatchFormed'>;

const trainingStepsTable: ExportTable = {
  name: 'training_steps',
  doc: 'One row per completed training step, in log order, with the batch it trained on (failed steps are not steps: they changed nothing).',
  columns: [
    RUN_ID,
    ROUND,
    ROLE,
    col('batch_id', 'string', 'The training batch.'),
    col('policy', 'string', 'The policy trained; null when the batch is not in the log.', true),
    col('from_version', 'int32', 'The version the step started from.'),
    col('to_version', 'int32', 'The version it made.'),
    col('batch_size', 'int32', 'Samples in the batch; null when the batch is not in the log.', true),
    col('control', 'string', 'Training control: `none`, `frozen` (no update) or `shuffled` (advantages permuted within groups); null as `batch_size`.', true),
    col('max_staleness', 'int32', 'The off-policy bound the batch was formed under; null for none (or as `batch_size`).', true),
    col('dropped', 'int32', 'Rewarded samples left out as too stale; null as `batch_size`.', true),
    col('metrics', 'json', "The trainer's metrics by name (e.g. `gradNorm`, `meanEntropy`), as a JSON object of numbers."),
  ],
  async *rows({ events, summary }) {
    const batches = new Map<string, Batch>();
    for await (const e of events(['TrainingBatchFormed', 'TrainingStepCompleted'])) {
      if (e.type === 'TrainingBatchFormed') {
        const d = e.data as Batch;
        batches.set(d.batchId, d);
        continue;
      }
      const d = e.data as EventData<'TrainingStepCompleted'>;
      const b = batches.get(d.batchId);
      yield {
        run_id: summary.runId,
        round: d.round,
        role: d.role,
        batch_id: d.batchId,
        policy: b?.policy.name ?? null,
        from_version: d.fromVersion,
        to_version: d.toVersion,
        batch_size: b?.size ?? null,
        control: b?.control ?? null,
        max_staleness: b?.staleness.maxStaleness ?? null,
        dropped: b ? b.staleness.dropped.length : null,
        metrics: d.metrics,
      };
    }
  },
};

/** Every table of an export, in the order docs/export.md lists them. */
export const EXPORT_TABLES: readonly ExportTable[] = [
  runTable,
  roundsTable,
  rewardsTable,
  executionsTable,
  mistakeBookTable,
  samplesTable,
  testsTable,
  trainingStepsTable,
];
