/** Hand-made run summaries for tests of what is shown of runs (report, effects over seeds):
 * rounds whose figures are given, every other figure absent. */
import type { RunSummary } from '../../src/report/run-data.js';
import type { RoundRow } from '../../src/projections/round-table.js';

/** Round `round` with the given figures; the others absent (null, or 0 for the code reward). */
export function roundRow(round: number, figures: Partial<RoundRow>): RoundRow {
  return {
    round,
    problems: 1,
    heldOutPass: 0,
    exactCorrect: null,
    validity: null,
    exactValid: null,
    trainedCorrect: null,
    trainedValid: null,
    killRate: null,
    mistakeBook: null,
    codeReward: 0,
    testReward: null,
    seconds: null,
    ...figures,
  };
}

/** A finished Code-A1 run `name` of `seed` with these rows and this recorded config. */
export function runSummary(name: string, seed: number, rows: RoundRow[], config: Record<string, unknown>, plannedRounds = rows.length): RunSummary {
  return {
    dir: `runs/${name}-s${seed}`,
    runId: `${name}-s${seed}`,
    name,
    method: 'code-a1',
    seed,
    status: 'finished',
    failure: null,
    plannedRounds,
    rows,
    selection: [],
    config,
  };
}
