/**
 * The catalog of crucible's events: the contract between actors. Each type has a current
 * version and a zod schema; old versions are upcast on read (see registry.ts). To change a
 * schema in a way old data does not satisfy, bump `version` and add an upcaster from the old one.
 *
 * Hashes are lowercase hex sha256 of blobs in the blob store (program text, test code, model
 * responses, outputs...): events stay small and payloads are written before the events naming them.
 */
import { z } from 'zod';
import { VERDICTS, VERDICT_CODE_RUN } from '../core/verdicts.js';
import { Role } from '../core/roles.js';
import { MODULE_LOADS } from '../core/module-load.js';
import type { EventEnvelope } from './envelope.js';
import { EventRegistry, defineEvent, type DataInputOf, type DataOf, type EnvelopeOf, type EventOptions, type TypeOf } from './registry.js';

const Id = z.string().min(1);
const Hash = z.string().regex(/^[0-9a-f]{64}$/, 'expected a lowercase hex sha256');
const Round = z.int().nonnegative();
const Count = z.int().nonnegative();
/** Tests [passed, run]. */
const Tally = z.tuple([Count, Count]);
const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

export const PolicyRef = z.strictObject({ role: Role, name: Id, version: Count });
export type PolicyRef = z.infer<typeof PolicyRef>;

/** How a sample was drawn, so it can be reproduced or at least explained. */
export const Sampling = z.strictObject({
  seed: z.int(),
  /** Index of the sample within its group. */
  index: Count,
  /** null when the policy does not expose it (or for v1 events, which did not record it). */
  temperature: z.number().nonnegative().nullable(),
  /** Id of the candidate in a catalog policy (offline demo), else null. */
  candidateId: Id.nullable(),
  /** The conditioning context a catalog policy drew under (handed back when training), else null. */
  contextKey: Id.nullable().default(null),
});
export type Sampling = z.infer<typeof Sampling>;

export const Verdict = z.enum(VERDICTS);
/** One (program, test) pair of an execution request, with the ids the requester uses for it. */
export const ExecutionPair = z.strictObject({ programId: Id, programHash: Hash, testId: Id, testHash: Hash });

export type ExecutionPair = z.infer<typeof ExecutionPair>;
type RequestBody = { programs: { programId: string; programHash: string }[]; tests: { testId: string; testHash: string }[]; pairs: number[]; reused: number[] };

/** The pair lists of an ExecutionRequested in its stored form: each program and test once. */
export function requestBody(pairs: readonly ExecutionPair[], reused: readonly ExecutionPair[] = []): RequestBody {
  const body: RequestBody = { programs: [], tests: [], pairs: [], reused: [] };
  const programAt = new Map<string, number>();
  const testAt = new Map<string, number>();
  const index = (p: ExecutionPair): [number, number] => {
    const pk = `${p.programId}\u0000${p.programHash}`;
    let pi = programAt.get(pk);
    if (pi === undefined) programAt.set(pk, (pi = body.programs.push({ programId: p.programId, programHash: p.programHash }) - 1));
    const tk = `${p.testId}\u0000${p.testHash}`;
    let ti = testAt.get(tk);
    if (ti === undefined) testAt.set(tk, (ti = body.tests.push({ testId: p.testId, testHash: p.testHash }) - 1));
    return [pi, ti];
  };
  for (const p of pairs) body.pairs.push(...index(p));
  for (const p of reused) body.reused.push(...index(p));
  return body;
}

function expand(d: RequestBody, list: readonly number[]): ExecutionPair[] {
  const out: ExecutionPair[] = new Array(list.length / 2);
  for (let i = 0; i < out.length; i++) {
    const p = d.programs[list[2 * i]!]!;
    const t = d.tests[list[2 * i + 1]!]!;
    out[i] = { programId: p.programId, programHash: p.programHash, testId: t.testId, testHash: t.testHash };
  }
  return out;
}

/** The pairs an ExecutionRequested asks to execute, in order (results name them by position). */
export const requestPairs = (d: RequestBody): ExecutionPair[] => expand(d, d.pairs);
/** The pairs it answers from recorded verdicts. */
export const reusedPairs = (d: RequestBody): ExecutionPair[] => expand(d, d.reused);
/** How many pairs it asks to execute. */
export const requestSize = (d: RequestBody): number => d.pairs.length / 2;

const Probability = z.number().min(0).max(1);
/** Exact figures of a (code, test) policy pair over some problems, with their means. */
export const PolicyFigures = z.strictObject({
  codeVersion: Count,
  testVersion: Count,
  /** Mean over the problems of the probability that the code policy samples a correct program. */
  correct: Probability,
  /** Mean over the problems of the probability that a drawn test is valid. */
  validTest: Probability,
  problems: z.array(z.strictObject({ problemId: Id, correct: Probability, validTest: Probability })),
});

const definitions = {
  /** Conductor, once at the start: what is run and how, so a replay can check it has the same config. */
  RunStarted: defineEvent({
    version: 1,
    schema: z.strictObject({
      method: Id,
      /** The resolved config (all defaults filled in). */
      config: z.unknown(),
      configHash: Hash,
      seed: z.int(),
      crucibleVersion: Id,
      /** The dataset of the run, in schedule order; each problem record is a blob. */
      problems: z.array(z.strictObject({ problemId: Id, problemHash: Hash })),
      /** The offline catalog (candidate programs and tests) the catalog policies sample from, as
       * a blob, so every process of the run uses the same one; null for other policies (and in
       * logs written before it was recorded). */
      catalogHash: Hash.nullable().default(null),
    }),
  }),
  /** The process that resumes a run recorded before (`crucible run` again): when the log was last
   * written before (null when unknown), so that a round's seconds leave out the time the run
   * was stopped. Informational, like every event's `at`: no actor reads it. */
  RunResumed: defineEvent({ version: 1, schema: z.strictObject({ stoppedAt: z.string().nullable() }) }),
  /** Conductor, after the last round. */
  RunCompleted: defineEvent({ version: 1, schema: z.strictObject({ rounds: Count }) }),
  /** The runtime, when the run cannot go on: an effect failed on every try (the reason a person reads). */
  RunFailed: defineEvent({ version: 1, schema: z.strictObject({ reason: z.string().min(1) }) }),
  /** The runtime: one try of an actor's effect threw (an actor with a failure event of its own,
   * the Learner's TrainingStepFailed, records that instead). willRetry: whether it is tried again. */
  EffectFailed: defineEvent({
    version: 1,
    schema: z.strictObject({ actor: Id, effectKey: Id, attempt: z.int().positive(), willRetry: z.boolean(), error: z.string().min(1) }),
  }),
  /** Conductor: a round begins over these problems. */
  RoundStarted: defineEvent({ version: 1, schema: z.strictObject({ round: Round, problemIds: z.array(Id) }) }),
  /** Conductor: one problem enters the round; solvers and adversaries react to it. */
  ProblemScheduled: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      problemHash: Hash,
      groupSize: z.int().positive(),
      /** Whether the adversary sees the candidate program. */
      whiteBox: z.boolean(),
      /** Policy versions to sample from, chosen by the Conductor so that timing never matters. */
      codeVersion: Count,
      testVersion: Count,
    }),
  }),
  /** Solver: one candidate program drawn from the code policy (the program text is a blob). */
  SolutionSampled: defineEvent({
    version: 2,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      solutionId: Id,
      programHash: Hash,
      policy: PolicyRef,
      sampling: Sampling,
      /** The raw model response, when the program was extracted from one. */
      responseHash: Hash.nullable(),
    }),
    upcasters: {
      // v1 did not record the sampling temperature: unknown, hence null.
      1: (d) => (isRecord(d) && isRecord(d.sampling) ? { ...d, sampling: { temperature: null, ...d.sampling } } : d),
    },
  }),
  /** Solver: programs drawn from the code policy at the round's version for the held-out
   * evaluation only (sampling.heldOutSamples): never attacked, rewarded or trained on; they
   * widen the held-out pass estimate beyond the G programs a round trains on. */
  HeldOutSampled: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      policy: PolicyRef,
      seed: z.int(),
      temperature: z.number().nonnegative().nullable(),
      programs: z
        .array(
          z.strictObject({
            /** `<round>/<problemId>/h<i>`: apart from the round's solution ids. */
            programId: Id,
            programHash: Hash,
            responseHash: Hash.nullable(),
          }),
        )
        .min(1),
    }),
  }),
  /** Adversary: a test suite drawn from the test policy, with each test's parse result. */
  TestsSampled: defineEvent({
    version: 2,
    packed: true,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      suiteId: Id,
      /** The program the adversary saw (white-box), null for black-box. */
      targetSolutionId: Id.nullable(),
      policy: PolicyRef,
      sampling: Sampling,
      responseHash: Hash.nullable(),
      /** Fraction of non-printable characters in the response (a Code-A1 penalty). */
      nonprintableRatio: z.number().min(0).max(1),
      tests: z.array(z.strictObject({ testId: Id, testHash: Hash, wellFormed: z.boolean(), reason: z.string().nullable() })),
    }),
    upcasters: {
      // v1 stored the same data plain (v2 stores it packed: lists as columns).
      1: (d) => d,
    },
  }),
  /** Solver or Adversary, with a sample drawn from a model server: how it was drawn and read.
   * The prompt, the raw answer and the tokens are blobs; `sampleId` is the solution or suite id. */
  ModelSampled: defineEvent({
    version: 1,
    schema: z.strictObject({
      sampleId: Id,
      role: Role,
      policy: PolicyRef,
      requestId: Id,
      index: Count,
      /** The prompt template and its version; promptHash is the exact text sent. */
      template: z.strictObject({ id: Id, version: z.int().positive() }),
      promptHash: Hash,
      responseHash: Hash,
      /** JSON {tokenIds, tokenLogprobs} as the server returned them; null when it returned neither. */
      tokensHash: Hash.nullable(),
      /** The request body as sent, less the prompt. */
      params: z.record(z.string(), z.unknown()),
      seed: z.int(),
      served: z.strictObject({ model: z.string().nullable(), fingerprint: z.string().nullable() }),
      finishReason: z.string().nullable(),
      parse: z.strictObject({
        status: z.enum(['ok', 'partial', 'invalid']),
        form: Id,
        found: Count,
        usable: Count,
        detail: z.string().nullable(),
      }),
    }),
  }),
  /** Solver or Adversary: one try of a request to a model server failed (recorded before the retry). */
  ModelRequestFailed: defineEvent({
    version: 1,
    schema: z.strictObject({
      requestId: Id,
      role: Role,
      attempt: z.int().positive(),
      kind: Id,
      message: z.string(),
      status: z.int().nullable(),
      retrying: z.boolean(),
      delayMs: Count,
    }),
  }),
  /** Judge (or Conductor): these (program, test) pairs must be executed, for this purpose. Each
   * program and each test is listed once; pairs name them by index (see requestPairs). */
  ExecutionRequested: defineEvent({
    version: 3,
    packed: true,
    schema: z
      .strictObject({
        round: Round,
        problemId: Id,
        requestId: Id,
        /** load: (older logs only) a probe that ran each program's module body and nothing after
         * it; ProgramExecuted now records the load outcome. */
        purpose: z.enum(['oracle', 'reward', 'mistake-book', 'heldout', 'kill', 'load']),
        programs: z.array(z.strictObject({ programId: Id, programHash: Hash })),
        tests: z.array(z.strictObject({ testId: Id, testHash: Hash })),
        /** Pairs to execute, flattened: program index, test index, program index, ... */
        pairs: z.array(Count),
        /** Pairs the request needs whose verdict is recorded already (an earlier round) or
         * requested by an earlier request of the same plan: never executed twice. Same form. */
        reused: z.array(Count),
      })
      .superRefine((d, ctx) => {
        for (const field of ['pairs', 'reused'] as const) {
          const list = d[field];
          if (list.length % 2 !== 0)
            ctx.addIssue({ code: 'custom', path: [field], message: `has ${list.length} numbers: expected (program, test) index pairs` });
          for (let i = 0; i < list.length; i++) {
            const max = i % 2 === 0 ? d.programs.length : d.tests.length;
            if (list[i]! >= max) {
              ctx.addIssue({ code: 'custom', path: [field, i], message: `index ${list[i]} is past the ${max} ${i % 2 === 0 ? 'programs' : 'tests'}` });
              break;
            }
          }
        }
      }),
    upcasters: {
      // v1 listed every pair in full.
      1: (d) => {
        if (!isRecord(d) || !Array.isArray(d.pairs)) return d;
        const { pairs, reused, ...rest } = d;
        return { ...rest, ...requestBody(pairs as ExecutionPair[], Array.isArray(reused) ? (reused as ExecutionPair[]) : []) };
      },
      // v2 stored the same data plain (v3 stores it packed: lists as columns).
      2: (d) => d,
    },
  }),
  /** Executor: the results of one program on its pairs of one request, as compact arrays
   * (result i is the request's pair `pairs[i]`). All results of a request are one commit. */
  ProgramExecuted: defineEvent({
    version: 2,
    packed: true,
    schema: z
      .strictObject({
        requestId: Id,
        programHash: Hash,
        /** Positions in the request's `pairs` (every pair of this program hash, any program id). */
        pairs: z.array(Count).min(1),
        /** One letter per result (see VERDICT_CODES). */
        verdicts: z.string().regex(VERDICT_CODE_RUN, 'expected one verdict letter (AWRTMOCS) per result'),
        timeMs: z.array(z.number().nonnegative()),
        memoryKb: z.array(z.number().nonnegative()),
        /** Result index -> output blob, only where the sandbox kept an output. */
        outputs: z.record(z.string().regex(/^\d+$/), Hash),
        /** Result index -> exception type, only for results that raised. */
        exceptions: z.record(z.string().regex(/^\d+$/), z.string().min(1)),
        /** Result indexes copied from an earlier execution of the same program and test. */
        cached: z.array(Count),
        /** False when any result ran with rlimits only (no bubblewrap). */
        isolated: z.boolean(),
        /** How the program's module body went, as the sandbox's failure phases tell it (Code-A1's
         * valid-program marker): ran, raised, compile_error, or unknown (nothing told). */
        load: z.enum(MODULE_LOADS),
      })
      .superRefine((d, ctx) => {
        const n = d.pairs.length;
        for (const [field, len] of [
          ['verdicts', d.verdicts.length],
          ['timeMs', d.timeMs.length],
          ['memoryKb', d.memoryKb.length],
        ] as const) {
          if (len !== n) ctx.addIssue({ code: 'custom', path: [field], message: `has ${len} entries for ${n} pairs` });
        }
        const indexes = [...Object.keys(d.outputs), ...Object.keys(d.exceptions)].map(Number).concat(d.cached);
        const bad = indexes.find((i) => i >= n);
        if (bad !== undefined) ctx.addIssue({ code: 'custom', path: ['pairs'], message: `result index ${bad} is past the ${n} results` });
      }),
    upcasters: {
      // v1 stored the same data plain (v2 stores it packed: lists as columns).
      1: (d) => d,
    },
  }),
  /** Executor, in logs written before ProgramExecuted (no longer written; still read): one
   * verdict for one (program, test) pair of a request. */
  ExecutionCompleted: defineEvent({
    version: 1,
    schema: z.strictObject({
      requestId: Id,
      programId: Id,
      programHash: Hash,
      testId: Id,
      testHash: Hash,
      verdict: Verdict,
      timeMs: z.number().nonnegative(),
      memoryKb: z.number().nonnegative(),
      outputHash: Hash.nullable(),
      exceptionType: z.string().nullable(),
      /** False when the sandbox ran with rlimits only (no bubblewrap). */
      isolated: z.boolean(),
      /** True when the verdict was copied from an earlier execution of the same program and test. */
      cached: z.boolean().default(false),
    }),
  }),
  /** Judge: validity of each generated test against the reference program, and its oracle output. */
  TestsJudged: defineEvent({
    version: 2,
    packed: true,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      tests: z.array(
        z.strictObject({
          testId: Id,
          testHash: Hash,
          valid: z.boolean(),
          reason: z.enum([
            'ok',
            'malformed',
            'no-expected',
            'duplicate',
            'reference-raises',
            'reference-timeout',
            'expected-mismatch',
            'reference-sandbox-error',
          ]),
          /** valid; corrected (stated expectation wrong, GT's output used); invalid; unknown (GT could not run). */
          status: z.enum(['valid', 'corrected', 'invalid', 'unknown']),
          /** The GT-corrected test (expected value = the reference's output), when usable. */
          oracleHash: Hash.nullable(),
        }),
      ),
    }),
    upcasters: {
      // v1 stored the same data plain (v2 stores it packed: lists as columns).
      1: (d) => d,
    },
  }),
  /** Judge: rewards and advantages of one role's samples for one problem, with their components. */
  RewardsAssigned: defineEvent({
    version: 2,
    packed: true,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      role: Role,
      /** Reward function and its version, e.g. "code-a1/v1". */
      rewardFn: Id,
      items: z.array(
        z.strictObject({
          sampleId: Id,
          reward: z.number(),
          advantage: z.number(),
          components: z.record(z.string(), z.number()),
        }),
      ),
    }),
    upcasters: {
      // v1 stored the same data plain (v2 stores it packed: lists as columns).
      1: (d) => d,
    },
  }),
  /** Judge: changes to a problem's Mistake Book; `count` is the count after the change. */
  MistakeBookUpdated: defineEvent({
    version: 2,
    packed: true,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      changes: z.array(
        z.strictObject({
          testKey: Id,
          testHash: Hash,
          delta: z.int(),
          count: Count,
          cause: z.enum(['fail', 'pass', 'decay', 'cap', 'blacklist']),
        }),
      ),
    }),
    upcasters: {
      // v1 stored the same data plain (v2 stores it packed: lists as columns).
      1: (d) => d,
    },
  }),
  /** Learner: rewarded samples grouped into one training batch (the batch file is a blob). */
  TrainingBatchFormed: defineEvent({
    version: 2,
    schema: z.strictObject({
      round: Round,
      batchId: Id,
      role: Role,
      policy: PolicyRef,
      batchHash: Hash,
      size: Count,
      sampleIds: z.array(Id),
      /** Training control: none (the method), frozen (the step applies no update: learning
       * rate 0), shuffled (advantages permuted within each GRPO group). */
      control: z.enum(['none', 'frozen', 'shuffled']).default('none'),
      /** Shuffled: sample i trained with the advantage of sample advantageFrom[i] (same group);
       * null when advantages are the Judge's own. */
      advantageFrom: z.array(Count).nullable().default(null),
      /** The off-policy bound the batch was formed under (learner.maxStaleness; null: none) and
       * the rewarded samples it left out, each with the policy version that drew it: drawn more
       * than maxStaleness versions before `policy.version`. */
      staleness: z.strictObject({
        maxStaleness: Count.nullable(),
        dropped: z.array(z.strictObject({ sampleId: Id, version: Count })),
      }),
    }),
    upcasters: {
      // v1 had no off-policy bound: every rewarded sample was trained, none dropped.
      1: (d) => (isRecord(d) && !('staleness' in d) ? { ...d, staleness: { maxStaleness: null, dropped: [] } } : d),
    },
  }),
  /** Learner: the bridge applied a training step; the policy moved from one version to the next. */
  TrainingStepCompleted: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      batchId: Id,
      role: Role,
      fromVersion: Count,
      toVersion: Count,
      metrics: z.record(z.string(), z.number()),
    }),
  }),
  /** Learner: a training step failed (nothing was applied); retryable says whether to try again. */
  TrainingStepFailed: defineEvent({
    version: 1,
    schema: z.strictObject({ batchId: Id, role: Role, error: z.string().min(1), retryable: z.boolean() }),
  }),
  /** Learner, warm start (learner.sft): the role's supervised steps reached `step` of `steps`,
   * and the trainer's checkpoint there is `checkpoint` (its parameters blob, as
   * PolicyVersionPublished names one): a resumed run goes on from the last of these. `key` is the
   * blob of what determines the warm policy (model, trainer code, rows, steps, batch size, lr,
   * seed): the key of the runs' warm-start cache. `cached`: the checkpoint was that cache's entry
   * under `key` (no step trained here; `step` is then `steps`). */
  WarmStartCheckpointed: defineEvent({
    version: 1,
    schema: z.strictObject({
      role: Role,
      step: Count,
      steps: z.int().positive(),
      policy: PolicyRef,
      checkpoint: Hash,
      key: Hash,
      cached: z.boolean(),
    }),
  }),
  /** Learner: a published version was loaded into the server that samples the role (weight
   * sync): which kind of server, the request as sent (URL and JSON body, no token) and its
   * answer's status, and the model name the version's samples ask for. */
  WeightsSynced: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      policy: PolicyRef,
      kind: z.enum(['bridge', 'vllm-lora', 'sglang']),
      url: z.string().min(1),
      request: z.record(z.string(), z.unknown()),
      status: z.int(),
      servedModel: z.string().min(1),
    }),
  }),
  /** Learner: a policy version is available for sampling (checkpoint directory, parameter hash). */
  PolicyVersionPublished: defineEvent({
    version: 1,
    schema: z.strictObject({
      /** The round whose batch made this version (0: the initial policy). */
      round: Round,
      policy: PolicyRef,
      checkpoint: z.string().min(1).nullable(),
      paramsHash: Hash.nullable(),
    }),
  }),
  /** Learner, with each training step: exact figures of the policies, per scheduled problem, for
   * the versions that drew the round's samples and for the versions the step made. */
  PolicyEvaluated: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      /** How the figures are known: catalog = the softmax over labelled candidates (exact). */
      basis: z.enum(['catalog']),
      sampled: PolicyFigures,
      trained: PolicyFigures,
    }),
  }),
  /** Judge: the evaluation figures of one problem-round (held-out pass, kill rate, validity). */
  ProblemEvaluated: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      /** Sampled programs, and those passing every held-out official test. */
      heldOut: z.strictObject({ programs: Count, passed: Count }),
      /** Known-incorrect programs (targets), suites, and the (suite, target) pairs where the
       * target fails at least one usable test of the suite. */
      kill: z.strictObject({ targets: Count, suites: Count, killed: Count }),
      tests: z.strictObject({ sampled: Count, wellFormed: Count, valid: Count }),
      mistakeBook: z.strictObject({ size: Count }),
      /** Mean rewards of the problem's samples. */
      rewards: z.strictObject({ code: z.number(), test: z.number() }),
      /** Each sampled program's tests [passed, run] as answer selection counts them, from the
       * verdicts the Judge judged on: usable generated tests, Mistake Book tests, held-out
       * tests. Answer selection reads them here instead of every request's verdicts. Absent in
       * logs written before it was recorded. */
      candidates: z.array(z.strictObject({ solutionId: Id, generated: Tally, book: Tally, heldOut: Tally })).optional(),
    }),
  }),
  /** Conductor (TCS): the training stage of a round, decided from the previous round's validity
   * rate by the configured switch rule; `roundsInStage` counts the completed rounds of the stage. */
  StageDecided: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      stage: z.union([z.literal(1), z.literal(2)]),
      switched: z.boolean(),
      roundsInStage: Count,
      /** The previous round's share of sampled tests judged valid (null in round 1). */
      validityRate: z.number().min(0).max(1).nullable(),
    }),
  }),
  /** Judge (EvolveCoder): the problem's evolving test set after a round, over the fixed candidate
   * programs (those of its first round), and the programs the round's selections would show the
   * augmenting model (adversarial: top 2 + 3 mid-pass; discriminative: 5 similar). */
  TestsEvolved: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      programs: z.array(z.strictObject({ programId: Id, programHash: Hash })),
      tests: z.array(Hash),
      adversarial: z.array(Id),
      fallback: z.boolean(),
      discriminative: z.array(Id),
      /** Distinct pass/fail signatures among the tests passing the in-round filter. */
      signatures: Count,
      /** Redundancy reduction: one test per signature of the filtered tests, chosen at random. */
      reduced: z.array(Hash),
    }),
  }),
  /** Judge (EvolveCoder): the final filter of a problem's evolved tests, in the last round. */
  DatasetEvolved: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: Round,
      problemId: Id,
      tests: z.array(Hash),
      lowPass: Count,
      perfect: Count,
      keepProblem: z.boolean(),
      reason: z.enum(['ok', 'too_few_tests', 'too_many_perfect']),
    }),
  }),
  /** Conductor: every problem of the round is judged and trained on. */
  RoundCompleted: defineEvent({ version: 1, schema: z.strictObject({ round: Round }) }),
  /** A work queue: an item was delivered its queue's maximum number of times without an ack;
   * it is dropped from the queue and this records why. */
  WorkAbandoned: defineEvent({
    version: 1,
    schema: z.strictObject({ queue: Id, commitId: Id, deliveries: Count, reason: z.string().min(1) }),
  }),
  /** Any effect runner: the output of a non-deterministic effect (timer firing, drawn seed...), so a
   * replay reads it instead of running the effect again. */
  EffectRecorded: defineEvent({
    version: 1,
    schema: z.strictObject({ effect: Id, key: Id, outputHash: Hash.nullable(), value: z.unknown() }),
  }),
};

export type CatalogSpecs = typeof definitions;
/** The registry the logs use by default. */
export const catalog = new EventRegistry(definitions);

export type EventType = TypeOf<CatalogSpecs>;
export type EventData<T extends EventType> = DataOf<CatalogSpecs, T>;
export type EventDataInput<T extends EventType> = DataInputOf<CatalogSpecs, T>;
/** A stored event of the catalog with typed data; a union over all types by default. */
export type CatalogEvent<T extends EventType = EventType> = EnvelopeOf<CatalogSpecs, T>;
export const EVENT_TYPES = catalog.types() as EventType[];

/** Builds a validated NewEvent of a catalog type (throws MalformedEventError naming the field). */
export function makeEvent<T extends EventType>(type: T, runId: string, data: EventDataInput<T>, opts?: EventOptions) {
  return catalog.make(type, runId, data, opts);
}

/** Type guard: `if (isEvent(e, 'SolutionSampled')) e.data.sampling.temperature ...` */
export function isEvent<T extends EventType>(event: EventEnvelope, type: T): event is CatalogEvent<T> {
  return event.type === type;
}

/** Causation links for an event written in reaction to `cause`. */
export function causedBy(cause: EventEnvelope): { causationId: string; correlationId: string } {
  return { causationId: cause.id, correlationId: cause.correlationId ?? cause.id };
}
