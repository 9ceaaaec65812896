/**
 * The catalog of the offline demo: per problem, candidate programs (the code policy's choices)
 * and candidate tests (the test policy's choices), built from the demo data through the
 * sandbox. The catalog policy (src/policies/catalog) is a softmax over it.
 */
import type { TestCase } from '../../../core/problem.js';
import type { Sandbox } from '../../../sandbox/api.js';
import type { DemoProblem } from '../index.js';
import { buildProgramCatalog, type ProgramCandidate, type ProgramCatalogOptions } from './programs.js';
import { runRequest } from './probes.js';
import { catalogSource, type CatalogSource } from './source.js';
import { buildTestCatalog, type CandidateTest, type TestCatalogOptions } from './tests.js';
import { stateExpected } from './expected.js';

export * from './programs.js';
export * from './tests.js';
export * from './source.js';

/** The candidates of every problem; built once (and cached) by the caller. */
export interface CatalogUniverse {
  programs: Record<string, ProgramCandidate[]>;
  tests: Record<string, CandidateTest[]>;
  /** Per problem, the ids of the candidate tests the reference accepts: the tests the Judge
   * finds valid. With the test policy's softmax this gives its exact expected validity. */
  validTests: Record<string, string[]>;
}

/** Ids of the candidate tests the Judge counts valid: the test states an expected value (Code-A1
 * requires one) and the reference runs its input without error (the Judge's oracle run, done
 * once here on the input alone; a wrong stated value is corrected, not invalid). A sandbox
 * failure is an error, never a verdict. */
export async function referenceAccepted(source: CatalogSource, sandbox: Sandbox, tests: readonly CandidateTest[]): Promise<string[]> {
  const reference = source.problem.solutions[0];
  if (reference === undefined) throw new Error(`${source.problem.id}: no reference solution`);
  const stated = (t: TestCase) => (t.style === 'stdio' ? t.output !== null : t.style === 'call' ? t.expected !== undefined : true);
  const inputOnly = (t: TestCase): TestCase => (t.style === 'stdio' ? { ...t, output: null } : t.style === 'call' ? { style: 'call', args: t.args } : t);
  const results = await sandbox.run({
    ...runRequest(
      source,
      reference,
      tests.map((t) => inputOnly(t.test)),
    ),
    role: 'reference',
  });
  const broken = results.find((r) => r.verdict === 'sandbox_error');
  if (broken) throw new Error(`${source.problem.id}: the sandbox failed while running the reference on candidate tests: ${broken.message ?? 'no detail'}`);
  const ran = new Set(results.filter((r) => r.verdict === 'accepted').map((r) => r.test));
  return tests.filter((t, i) => ran.has(i) && stated(t.test)).map((t) => t.testId);
}

/** Candidates of every given demo problem; problems are built concurrently on the sandbox. */
export async function buildCatalogUniverse(
  demo: readonly DemoProblem[],
  sandbox: Sandbox,
  opts: { programs?: ProgramCatalogOptions; tests?: TestCatalogOptions } = {},
): Promise<CatalogUniverse> {
  const universe: CatalogUniverse = { programs: {}, tests: {}, validTests: {} };
  const built = await Promise.all(
    demo.map(async (d) => {
      const source = catalogSource(d);
      const programs = await buildProgramCatalog(source, sandbox, opts.programs);
      // Candidate tests state an expected value, as a test-writing model does (sometimes wrongly).
      const tests = await stateExpected(source, programs, buildTestCatalog(source, opts.tests), sandbox, { seed: opts.tests?.seed });
      // Valid as the Judge counts it: the reference accepts the input and agrees with the stated value.
      const valid = await referenceAccepted(source, sandbox, tests);
      return { id: d.problem.id, programs, tests, valid };
    }),
  );
  for (const b of built) {
    universe.programs[b.id] = b.programs;
    universe.tests[b.id] = b.tests;
    universe.validTests[b.id] = b.valid;
  }
  return universe;
}
