/**
 * Exact figures of the catalog policies: the catalog knows each candidate's label, and the policy
 * is a softmax, so what a sampled figure estimates can be computed instead of drawn.
 * - correct: probability that the code policy samples a program written to be correct
 *   (reference or variant);
 * - validTest: probability that one test drawn from the test policy is accepted by the reference
 *   (a test the Judge finds valid). Black-box: the softmax mass on those tests. White-box: that
 *   mass under each target program's context, weighted by the code policy's probability of it.
 */
import type { CatalogUniverse } from '../../datasets/demo/catalog/index.js';
import { PolicyInputError } from '../port.js';
import { type CatalogPolicy, codeContextKey, testContextKey } from './model.js';

export interface ExactFigures {
  correct: number;
  validTest: number;
}

function massOn(dist: Map<string, number>, ids: ReadonlySet<string>): number {
  let p = 0;
  for (const [id, q] of dist) if (ids.has(id)) p += q;
  return p;
}

export function exactFigures(universe: CatalogUniverse, code: CatalogPolicy, test: CatalogPolicy, problemId: string, whiteBox: boolean): ExactFigures {
  if (code.role !== 'code' || test.role !== 'test')
    throw new PolicyInputError(`exact figures need the code and test policies, got ${code.role} and ${test.role}`);
  const programs = universe.programs[problemId];
  const valid = universe.validTests[problemId];
  if (!programs || !valid) throw new PolicyInputError(`the catalog has no candidates (or no test validity) for problem ${problemId}`);
  const codeDist = code.distribution(codeContextKey(problemId));
  const correct = massOn(codeDist, new Set(programs.filter((p) => p.correct).map((p) => p.candidateId)));
  const validIds = new Set(valid);
  let validTest = 0;
  if (whiteBox) {
    for (const [target, q] of codeDist) validTest += q * massOn(test.distribution(testContextKey(problemId, target)), validIds);
  } else {
    validTest = massOn(test.distribution(testContextKey(problemId)), validIds);
  }
  // Sums of softmax terms can pass 1 by a rounding step.
  return { correct: Math.min(1, correct), validTest: Math.min(1, validTest) };
}
