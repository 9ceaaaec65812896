import { parseConfig } from '../../src/config/load.js';

/** The small demo run the end-to-end tests share: 3 problems, 4 rounds, a few seconds. */
export function smallConfig(dir: string, overrides: Record<string, unknown> = {}) {
  return parseConfig({
    name: 'small',
    seed: 3,
    rounds: 4,
    dir,
    dataset: { format: 'demo', limit: 3 },
    sampling: { problemsPerRound: 3, groupSize: 6, suitesPerProgram: 2, suiteSize: 4, whiteBox: false },
    policies: { code: { lr: 1.0, mutants: 4 }, test: { lr: 1.0, candidates: 24 } },
    selection: { testSamples: 'all' },
    ...overrides,
  });
}

/** Overrides of smallConfig for the first two demo problems only. The third (climb-stairs) has
 * mutants that run into their time limit, test after test, and so takes most of a small run's
 * time; tests whose assertions do not depend on slow programs leave it out. */
export const TWO_PROBLEMS = {
  dataset: { format: 'demo', limit: 2 },
  sampling: { problemsPerRound: 2, groupSize: 6, suitesPerProgram: 2, suiteSize: 4, whiteBox: false },
} as const;

/** smallConfig on the first two demo problems (see TWO_PROBLEMS). */
export function twoProblemConfig(dir: string, overrides: Record<string, unknown> = {}) {
  return smallConfig(dir, { ...TWO_PROBLEMS, ...overrides });
}

/** A small run sampling from two `gpu-bridge serve` processes (code, test) whose weights the
 * Learner reloads through their admin endpoint (token in the environment variable `tokenEnv`). */
export function servedRunConfig(
  dir: string,
  servers: { code: { baseUrl: string; model: string }; test: { baseUrl: string; model: string } },
  opts: { tokenEnv: string; maxTokens: number },
) {
  const openai = (s: { baseUrl: string; model: string }) => ({
    baseUrl: s.baseUrl,
    model: s.model,
    maxTokens: opts.maxTokens,
    concurrency: 1,
    timeoutMs: 60_000,
    retry: { attempts: 2, baseDelayMs: 50 },
  });
  return parseConfig({
    ...smallConfig(dir),
    rounds: 2,
    dataset: { format: 'demo', limit: 2 },
    sampling: { problemsPerRound: 2, groupSize: 2, suitesPerProgram: 1, suiteSize: 2, whiteBox: false },
    selection: { testSamples: 'all' },
    policies: { code: { backend: 'openai', lr: 0.001, openai: openai(servers.code) }, test: { backend: 'openai', lr: 0.001, openai: openai(servers.test) } },
    learner: { bridge: { backend: 'toy', seed: 0, device: 'cpu', reload: { adminTokenEnv: opts.tokenEnv } } },
  });
}

/** `crucible run configs/demo.yaml` overrides for a demo run of the CLI small enough for a test:
 * two problems of four programs, in `dir`. */
export function smallDemoArgs(dir: string, rounds = 2): string[] {
  const set = {
    rounds,
    'dataset.limit': 2,
    'sampling.problemsPerRound': 2,
    'sampling.groupSize': 4,
    'policies.code.mutants': 2,
    'policies.test.candidates': 12,
    dir,
  };
  return Object.entries(set).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
}
