/**
 * Stated expected values for the catalog's candidate tests. A test-writing model states an
 * expected value with each input (Code-A1 and CURE need one), and it is sometimes wrong. The
 * catalog imitates that: each candidate states the output of one of the problem's candidate
 * programs, drawn (seeded) so that most statements come from a correct program and some from a
 * buggy one. A stating program that raises states nothing (the test then has no expected value).
 * Methods without expected values (ACE) strip them before running.
 */
import { withExpectedOutput } from '../../../core/problem.js';
import { Rng } from '../../../core/rng.js';
import type { Sandbox } from '../../../sandbox/api.js';
import type { ProgramCandidate } from './programs.js';
import { runRequest } from './probes.js';
import type { CatalogSource } from './source.js';
import type { CandidateTest } from './tests.js';

export interface StatedExpectedOptions {
  seed?: number;
  /** Share of statements drawn from a correct program (default 0.75). */
  correctShare?: number;
}

export async function stateExpected(
  source: CatalogSource,
  programs: readonly ProgramCandidate[],
  tests: readonly CandidateTest[],
  sandbox: Sandbox,
  opts: StatedExpectedOptions = {},
): Promise<CandidateTest[]> {
  const rng = Rng.derive(opts.seed ?? 0, source.problem.id, 'stated-expected');
  const correct = programs.filter((p) => p.correct);
  const wrong = programs.filter((p) => !p.correct);
  const share = opts.correctShare ?? 0.75;
  const byProgram = new Map<string, number[]>();
  tests.forEach((_, i) => {
    const pool = wrong.length === 0 || rng.next() < share ? correct : wrong;
    const p = rng.pick(pool).candidateId;
    byProgram.set(p, [...(byProgram.get(p) ?? []), i]);
  });
  const out = tests.slice();
  for (const [candidateId, idx] of byProgram) {
    const program = programs.find((p) => p.candidateId === candidateId)!.program;
    const results = await sandbox.run(
      runRequest(
        source,
        program,
        idx.map((i) => tests[i]!.test),
      ),
    );
    for (const r of results) {
      const i = idx[r.test]!;
      if (r.verdict !== 'accepted' || r.output === undefined) continue;
      const stated = withExpectedOutput(tests[i]!.test, r.output);
      if (stated !== null) out[i] = { ...tests[i]!, test: stated, origin: `${tests[i]!.origin}|stated:${candidateId}` };
    }
  }
  return out;
}
