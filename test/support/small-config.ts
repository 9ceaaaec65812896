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
