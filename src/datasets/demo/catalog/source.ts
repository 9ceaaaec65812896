/**
 * What the catalog builders may see of a demo problem: everything but its held-out tests.
 * Held-out tests measure the code policy; if they shaped the candidates (which mutants are kept,
 * which tests the Adversary can draw), the measure would leak into training. So the builders get
 * a record without them, plus the held-out inputs only as keys to stay clear of.
 */
import type { Problem, TestCase } from '../../../core/problem.js';
import type { DemoExtras, DemoProblem } from '../index.js';
import { testKey } from './test-key.js';

export interface CatalogSource {
  readonly problem: Pick<Problem, 'id' | 'style' | 'entryPoint' | 'limits' | 'comparison' | 'solutions' | 'statement'>;
  /** The problem's public examples (with expected values). */
  readonly examples: readonly TestCase[];
  readonly extras: DemoExtras;
  /** Keys (testKey) of held-out inputs: no candidate test or probe may equal one. */
  readonly avoid: ReadonlySet<string>;
}

export function catalogSource({ problem, extras }: DemoProblem): CatalogSource {
  const { id, style, entryPoint, limits, comparison, solutions, statement } = problem;
  return {
    problem: { id, style, entryPoint, limits, comparison, solutions, statement },
    examples: problem.tests.public,
    extras,
    avoid: new Set(problem.tests.private.map(testKey)),
  };
}
