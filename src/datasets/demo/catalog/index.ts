/**
 * The catalog of the offline demo: per problem, candidate programs (the code policy's choices)
 * and candidate tests (the test policy's choices), built from the demo data through the
 * sandbox. The catalog policy (src/policies/catalog) is a softmax over it.
 */
import type { Sandbox } from '../../../sandbox/api.js';
import type { DemoProblem } from '../index.js';
import { buildProgramCatalog, type ProgramCandidate, type ProgramCatalogOptions } from './programs.js';
import { catalogSource } from './source.js';
import { buildTestCatalog, type CandidateTest, type TestCatalogOptions } from './tests.js';
import { stateExpected } from './expected.js';

export * from './programs.js';
export * from './tests.js';
export * from './source.js';

/** The candidates of every problem; built once (and cached) by the caller. */
export interface CatalogUniverse {
  programs: Record<string, ProgramCandidate[]>;
  tests: Record<string, CandidateTest[]>;
}

/** Candidates of every given demo problem; problems are built concurrently on the sandbox. */
export async function buildCatalogUniverse(
  demo: readonly DemoProblem[],
  sandbox: Sandbox,
  opts: { programs?: ProgramCatalogOptions; tests?: TestCatalogOptions } = {},
): Promise<CatalogUniverse> {
  const universe: CatalogUniverse = { programs: {}, tests: {} };
  const built = await Promise.all(demo.map(async (d) => {
    const source = catalogSource(d);
    const programs = await buildProgramCatalog(source, sandbox, opts.programs);
    // Candidate tests state an expected value, as a test-writing model does (sometimes wrongly).
    const tests = await stateExpected(source, programs, buildTestCatalog(source, opts.tests), sandbox, { seed: opts.tests?.seed });
    return { id: d.problem.id, programs, tests };
  }));
  for (const b of built) {
    universe.programs[b.id] = b.programs;
    universe.tests[b.id] = b.tests;
  }
  return universe;
}
