import { z } from 'zod';
import { BridgeTrainerOptions, OpenAIPolicySection } from './openai.js';

/**
 * The run config: one YAML file per run, validated here. Every section is strict, so a
 * misspelled key is an error that names it instead of a silently ignored setting.
 */

const PolicyConfig = z
  .object({
    /** catalog: the offline softmax policy over a problem's candidate programs/tests.
     * openai: a model served by an OpenAI-compatible server (settings under `openai`). */
    backend: z.enum(['catalog', 'openai']).default('catalog'),
    openai: OpenAIPolicySection.optional(),
    /** Learning rate of the catalog trainer's softmax policy gradient. */
    lr: z.number().positive().default(0.5),
    /** Catalog code policy: AST mutants of the reference added to each problem's candidates. */
    mutants: z.number().int().nonnegative().default(8),
    /** Catalog test policy: candidate tests per problem. */
    candidates: z.number().int().positive().default(48),
  })
  .strict();

/** The methods a run can follow (METHODS.md); each is a Judge module over the same actors. */
export const METHODS = ['code-a1', 'cure', 'tcs', 'evolvecoder', 'ace', 'golden-tests', 'self-play'] as const;
export type Method = (typeof METHODS)[number];

export const RunConfig = z
  .object({
    name: z.string().min(1).default('run'),
    /** Reward and selection rules of the Judge: which method's judgement runs. */
    method: z.enum(METHODS).default('code-a1'),
    seed: z.number().int().nonnegative().default(0),
    rounds: z.number().int().positive().default(8),
    /** Where runs are written: <dir>/<run-id>/. */
    dir: z.string().default('runs'),
    log: z
      .object({
        backend: z.enum(['sqlite']).default('sqlite'),
        synchronous: z.enum(['full', 'normal']).default('full'),
      })
      .strict()
      .default({ backend: 'sqlite', synchronous: 'full' }),
    dataset: z
      .object({
        format: z.string().default('demo'),
        path: z.string().optional(),
        /** Use at most this many problems (in the source's order). */
        limit: z.number().int().positive().optional(),
        /** Use only these problems (ids, in the source's order), before limit. */
        ids: z.array(z.string().min(1)).min(1).optional(),
      })
      .strict()
      .default({ format: 'demo' }),
    sampling: z
      .object({
        /** Problems scheduled per round (rotating over the dataset). */
        problemsPerRound: z.number().int().positive().default(8),
        /** G: programs sampled per problem. */
        groupSize: z.number().int().positive().default(8),
        /** Test suites sampled per program (white-box) or per problem (black-box). */
        suitesPerProgram: z.number().int().positive().default(2),
        /** Tests per suite (Code-A1: up to 8). */
        suiteSize: z.number().int().positive().default(8),
        /** White-box: the adversary sees the program it attacks. */
        whiteBox: z.boolean().default(true),
        /** Programs per problem sampled only for the held-out evaluation, at the round's code
         * version (HeldOutSampled): the held-out pass is then over G + this many programs per
         * problem, while training, attacks and rewards still see the G. Unset: the G only. */
        heldOutSamples: z.number().int().positive().optional(),
      })
      .strict()
      .default({ problemsPerRound: 8, groupSize: 8, suitesPerProgram: 2, suiteSize: 8, whiteBox: true }),
    policies: z
      .object({
        /** One policy for both roles (CURE, ACE): one parameter set, one version stream, published
         * under one name; false: a policy per role (Code-A1's separation). */
        shared: z.boolean().default(false),
        code: PolicyConfig.default(PolicyConfig.parse({})),
        test: PolicyConfig.default(PolicyConfig.parse({})),
      })
      .strict()
      .default({ shared: false, code: PolicyConfig.parse({}), test: PolicyConfig.parse({}) }),
    rewards: z
      .object({
        /** Code-A1's weight of validity against attack in the test reward. */
        alpha: z.number().min(0).max(1).default(0.5),
        /** GRPO advantage: divide by the group's sample std, population std, or not at all. */
        std: z.enum(['sample', 'population', 'none']).default('sample'),
      })
      .strict()
      .default({ alpha: 0.5, std: 'sample' }),
    mistakeBook: z
      .object({
        enabled: z.boolean().default(true),
        /** Tests replayed against every candidate of the problem. */
        replay: z.number().int().nonnegative().default(8),
        /** Most tests kept per problem; null: no cap (Code-A1's release has none). */
        cap: z.number().int().positive().nullable().default(64),
        /** Subtract this from every count each round (0: no decay). */
        decay: z.number().int().nonnegative().default(0),
        blacklist: z.boolean().default(true),
      })
      .strict()
      .default({ enabled: true, replay: 8, cap: 64, decay: 0, blacklist: true }),
    /** Code-A1's release rules that crucible can change. */
    codeA1: z
      .object({
        /** release: +1 only for failed generated tests, -1 only for passed replayed tests;
         * any: every failure adds and every pass of a stored test subtracts. */
        mistakeBookRule: z.enum(['release', 'any']).default('release'),
        /** Drop code groups whose rewards are all 0 or all 1 (defined in the release, never called). */
        codeGroupFilter: z.boolean().default(false),
      })
      .strict()
      .default({ mistakeBookRule: 'release', codeGroupFilter: false }),
    /** CURE's released switches (optimization_config.py), with the release's defaults. */
    cure: z
      .object({
        /** post_stage: a test's reward scale is all-or-nothing (every incorrect program fails
         * it, any incorrect program passes it) instead of the share of incorrect programs. The
         * release also stops showing an example in the test prompt; crucible's prompts show none. */
        postStage: z.boolean().default(false),
        /** enable_efficient: a group whose rewards are all 1 is kept as it is, not dropped, and
         * kept groups are length-regularized (for long chain-of-thought models). */
        enableEfficient: z.boolean().default(false),
        /** length_regularize on kept groups, from the samples' response lengths in tokens; null:
         * exactly when enableEfficient (the release). */
        lengthRegularize: z.boolean().nullable().default(null),
        /** length_regularize's clamp of the median length of the positive samples. */
        maxLenThreshold: z.number().int().nonnegative().default(8000),
        minLenThreshold: z.number().int().nonnegative().default(1000),
      })
      .strict()
      .default({ postStage: false, enableEfficient: false, lengthRegularize: null, maxLenThreshold: 8000, minLenThreshold: 1000 }),
    /** TCS: two stages of test-generator training (our reading of the abstract). */
    tcs: z
      .object({
        /** Switch to stage 2 after this many rounds, or once a round's validity reaches the threshold. */
        switchRule: z
          .discriminatedUnion('kind', [
            z.object({ kind: z.literal('rounds'), afterRounds: z.number().int().nonnegative() }).strict(),
            z.object({ kind: z.literal('validity'), threshold: z.number().min(0).max(1), minRounds: z.number().int().nonnegative().default(0) }).strict(),
          ])
          .default({ kind: 'validity', threshold: 0.8, minRounds: 0 }),
        /** Most tests per problem in the rolling buffer of test-policy samples (whole suites,
         * oldest dropped first; the current round's are always kept). */
        bufferSize: z.number().int().positive().default(256),
        /** Policy-aligned: keep samples written by test-policy versions >= current - maxStaleness
         * (null: any version). */
        maxStaleness: z.number().int().nonnegative().nullable().default(1),
        validityWeight: z.number().nonnegative().default(0.5),
        counterexampleWeight: z.number().nonnegative().default(0.5),
        counterexample: z.enum(['any', 'fraction']).default('any'),
      })
      .strict()
      .default({
        switchRule: { kind: 'validity', threshold: 0.8, minRounds: 0 },
        bufferSize: 256,
        maxStaleness: 1,
        validityWeight: 0.5,
        counterexampleWeight: 0.5,
        counterexample: 'any',
      }),
    /** EvolveCoder: the released pipeline's selections and final filter. */
    evolvecoder: z
      .object({
        /** Adversarial augmentation: the top programs by pass rate, and mid-pass programs in [midLow, midHigh). */
        top: z.number().int().nonnegative().default(2),
        mid: z.number().int().nonnegative().default(3),
        midLow: z.number().min(0).max(1).default(0.4),
        midHigh: z.number().min(0).max(1).default(0.9),
        /** Discriminative augmentation: programs with similar signatures shown together. */
        similar: z.number().int().positive().default(5),
        /** Final filter: pass-rate floor, tests kept per signature, problem drop rules. */
        minPassRate: z.number().min(0).max(1).default(0.1),
        perSignature: z.number().int().positive().default(5),
        minTests: z.number().int().nonnegative().default(5),
        maxPerfect: z.number().int().nonnegative().default(60),
      })
      .strict()
      .default({ top: 2, mid: 3, midLow: 0.4, midHigh: 0.9, similar: 5, minPassRate: 0.1, perSignature: 5, minTests: 5, maxPerfect: 60 }),
    /** ACE: crash-only judgement of test inputs (our reading of the abstract). */
    ace: z
      .object({
        /** What a test that crashes every program becomes for KTO. */
        suspectLabel: z.enum(['suspect', 'desirable', 'undesirable']).default('suspect'),
        minProgramsForSuspect: z.number().int().positive().default(2),
      })
      .strict()
      .default({ suspectLabel: 'suspect', minProgramsForSuspect: 2 }),
    selection: z
      .object({
        /** Which test-policy samples train: all, or Code-A1's TOPVAR. */
        testSamples: z.enum(['all', 'topvar']).default('topvar'),
      })
      .strict()
      .default({ testSamples: 'topvar' }),
    learner: z
      .object({
        /** Controls for the demo's evidence: none (train as the method says), frozen (steps are
         * recorded but apply no update), shuffled (advantages permuted within each GRPO group
         * with a seeded permutation, so the update carries no signal about which sample was good). */
        control: z.enum(['none', 'frozen', 'shuffled']).default('none'),
        /** Off-policy bound: a sample drawn from a policy more than this many versions older
         * than the one its step trains is dropped from the batch (recorded in
         * TrainingBatchFormed). 0 is on-policy, Code-A1's setting; k > 0 lets generation run
         * ahead of training by k versions, as asynchronous trainers do. */
        maxStaleness: z.number().int().nonnegative().default(0),
        /** Served (openai) policies: train them through a gpu-bridge process. */
        bridge: BridgeTrainerOptions.optional(),
        /** Warm start before round 1 (served policies through the bridge): SFT steps on the
         * problems' known programs (statement -> program: the correct ones and the labelled
         * wrong ones) and their public tests (statement -> tests), recorded as round-0 training
         * events and published as the version round 1 samples. Every control takes the same SFT,
         * computed once: the result is kept in the runs' warm-start cache (docs/models.md). */
        sft: z
          .object({
            /** Steps per role: one number for both, or each role's own (a test policy drilled
             * on a few public examples until it writes only them samples identical suites, which
             * carry no GRPO signal; fewer steps leave it room to vary). */
            steps: z.union([z.number().int().positive(), z.strictObject({ code: z.number().int().positive(), test: z.number().int().positive() })]),
            /** Rows per step, drawn without replacement by a seeded shuffle of all rows each pass. */
            batchSize: z.number().int().positive().default(16),
            lr: z.number().positive().default(0.001),
            /** Roles trained: both, or only one (the other starts from its random weights). */
            roles: z
              .array(z.enum(['code', 'test']))
              .min(1)
              .default(['code', 'test']),
            /** How the steps are recorded: appended to the log with the trainer's checkpoint (a
             * stopped run resumes from the last one) after this many steps, or sooner once that
             * many seconds have passed since the last record (absent: no time bound). */
            record: z
              .object({ steps: z.number().int().positive().default(10), seconds: z.number().positive().optional() })
              .strict()
              .default({ steps: 10 }),
          })
          .strict()
          .optional(),
      })
      .strict()
      .default({ control: 'none', maxStaleness: 0 }),
    executor: z
      .object({
        workers: z.number().int().positive().optional(),
        /** auto and bwrap both require bubblewrap for a run (it trains on the verdicts); none
         * accepts verdicts from rlimits and seccomp only, and says so in each verdict. */
        isolation: z.enum(['auto', 'bwrap', 'none']).default('auto'),
        pythonPath: z.string().default('/usr/bin/python3'),
      })
      .strict()
      .default({ isolation: 'auto', pythonPath: '/usr/bin/python3' }),
  })
  .strict()
  .superRefine((c, ctx) => {
    for (const role of ['code', 'test'] as const) {
      const p = c.policies[role];
      if (p.backend === 'openai' && !p.openai) {
        ctx.addIssue({ code: 'custom', path: ['policies', role, 'openai'], message: 'backend openai needs an openai section (baseUrl, model, ...)' });
      }
      if (p.backend !== 'openai' && p.openai) {
        ctx.addIssue({
          code: 'custom',
          path: ['policies', role, 'openai'],
          message: `an openai section is only read with backend openai (this policy is ${p.backend})`,
        });
      }
    }
    if (c.policies.code.backend !== c.policies.test.backend) {
      ctx.addIssue({
        code: 'custom',
        path: ['policies', 'test', 'backend'],
        message: `both policies use one backend for now (code is ${c.policies.code.backend}, test is ${c.policies.test.backend})`,
      });
    }
    // A served model is trained through gpu-bridge; without one, only the frozen control
    // (steps recorded, nothing applied) is honest about what happens to it.
    if (c.policies.code.backend === 'openai' && !c.learner.bridge && c.learner.control !== 'frozen') {
      ctx.addIssue({
        code: 'custom',
        path: ['learner', 'control'],
        message: 'policies served over openai are trained only through a gpu-bridge (learner.bridge); without one set learner.control: frozen',
      });
    }
    // Response lengths in tokens are what model servers return; the catalog policy has none.
    if (c.method === 'cure' && (c.cure.lengthRegularize ?? c.cure.enableEfficient) && c.policies.code.backend !== 'openai') {
      ctx.addIssue({
        code: 'custom',
        path: ['cure', c.cure.lengthRegularize === null ? 'enableEfficient' : 'lengthRegularize'],
        message: `length regularization reads the samples' response lengths in tokens, which only served (openai) policies record; these are ${c.policies.code.backend}`,
      });
    }
    if (c.cure.minLenThreshold > c.cure.maxLenThreshold) {
      ctx.addIssue({
        code: 'custom',
        path: ['cure', 'minLenThreshold'],
        message: `minLenThreshold (${c.cure.minLenThreshold}) is above maxLenThreshold (${c.cure.maxLenThreshold})`,
      });
    }
    const bridge = c.learner.bridge;
    for (const role of ['code', 'test'] as const) {
      const o = c.policies[role].openai;
      if (o && !o.baseUrl && !bridge?.serve)
        ctx.addIssue({
          code: 'custom',
          path: ['policies', role, 'openai', 'baseUrl'],
          message: 'baseUrl is required unless the run starts its own servers (learner.bridge.serve)',
        });
      if (o?.baseUrl && bridge?.serve)
        ctx.addIssue({ code: 'custom', path: ['policies', role, 'openai', 'baseUrl'], message: 'learner.bridge.serve starts the servers: leave baseUrl out' });
    }
    if (bridge?.reload && bridge.weightSync)
      ctx.addIssue({
        code: 'custom',
        path: ['learner', 'bridge', 'weightSync'],
        message: 'give reload or weightSync, not both (reload is weightSync kind bridge)',
      });
    if (bridge?.serve && (bridge.reload || bridge.weightSync))
      ctx.addIssue({
        code: 'custom',
        path: ['learner', 'bridge', 'serve'],
        message: 'a run that starts its own servers syncs their weights itself: leave reload and weightSync out',
      });
    if (c.learner.sft && !bridge)
      ctx.addIssue({ code: 'custom', path: ['learner', 'sft'], message: 'learner.sft trains served policies through gpu-bridge: it needs learner.bridge' });
    if (c.learner.sft && c.policies.shared)
      ctx.addIssue({ code: 'custom', path: ['learner', 'sft'], message: 'learner.sft trains one policy per role; policies.shared is not supported with it' });
    if (c.learner.bridge && c.policies.code.backend !== 'openai') {
      ctx.addIssue({
        code: 'custom',
        path: ['learner', 'bridge'],
        message: `learner.bridge trains served (openai) policies; these are ${c.policies.code.backend}`,
      });
    }
  });

export type RunConfig = z.infer<typeof RunConfig>;
export type RunConfigInput = z.input<typeof RunConfig>;
