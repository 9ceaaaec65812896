/** The offline catalog policy: candidates per problem and a softmax policy over them. */
import type { DemoProblem } from '../../datasets/demo/index.js';
import type { CatalogUniverse } from './model.js';
import { buildProgramCatalog, type ProgramCatalogOptions } from './programs.js';
import { buildTestCatalog, type TestCatalogOptions } from './tests.js';

export * from './model.js';
export * from './programs.js';
export * from './tests.js';
export * from './softmax.js';

/** Candidates of every given demo problem (runs python for the mutants; cache the result). */
export async function buildCatalogUniverse(
  demo: readonly DemoProblem[],
  opts: { programs?: ProgramCatalogOptions; tests?: TestCatalogOptions } = {},
): Promise<CatalogUniverse> {
  const universe: CatalogUniverse = { programs: {}, tests: {} };
  for (const { problem, extras } of demo) {
    universe.programs[problem.id] = await buildProgramCatalog(problem, extras, opts.programs);
    universe.tests[problem.id] = buildTestCatalog(problem, extras, opts.tests);
  }
  return universe;
}
