import { z } from 'zod';

/**
 * The run config: one YAML file per run, validated here. Every section is strict, so a
 * misspelled key is an error that names it instead of a silently ignored setting.
 */

const PolicyConfig = z
  .object({
    /** catalog: the offline softmax policy over a problem's candidate programs/tests. */
    backend: z.enum(['catalog']).default('catalog'),
    /** Learning rate of the catalog trainer's softmax policy gradient. */
    lr: z.number().positive().default(0.5),
    /** Catalog code policy: AST mutants of the reference added to each problem's candidates. */
    mutants: z.number().int().nonnegative().default(8),
    /** Catalog test policy: candidate tests per problem. */
    candidates: z.number().int().positive().default(48),
  })
  .strict();

export const RunConfig = z
  .object({
    name: z.string().min(1).default('run'),
    /** Reward and selection rules of the Judge (Code-A1 today; the other methods' rewards are in src/rewards). */
    method: z.enum(['code-a1']).default('code-a1'),
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
      })
      .strict()
      .default({ problemsPerRound: 8, groupSize: 8, suitesPerProgram: 2, suiteSize: 8, whiteBox: true }),
    policies: z
      .object({ code: PolicyConfig.default(PolicyConfig.parse({})), test: PolicyConfig.default(PolicyConfig.parse({})) })
      .strict()
      .default({ code: PolicyConfig.parse({}), test: PolicyConfig.parse({}) }),
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
        /** Most tests kept per problem. */
        cap: z.number().int().positive().default(64),
        /** Subtract this from every count each round (0: no decay). */
        decay: z.number().int().nonnegative().default(0),
        blacklist: z.boolean().default(true),
      })
      .strict()
      .default({ enabled: true, replay: 8, cap: 64, decay: 0, blacklist: true }),
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
      })
      .strict()
      .default({ control: 'none' }),
    executor: z
      .object({
        workers: z.number().int().positive().optional(),
        isolation: z.enum(['auto', 'bwrap', 'none']).default('auto'),
        pythonPath: z.string().default('/usr/bin/python3'),
      })
      .strict()
      .default({ isolation: 'auto', pythonPath: '/usr/bin/python3' }),
  })
  .strict();

export type RunConfig = z.infer<typeof RunConfig>;
export type RunConfigInput = z.input<typeof RunConfig>;
