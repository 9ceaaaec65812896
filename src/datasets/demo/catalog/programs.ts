/**
 * A problem's candidate programs for the catalog code policy: the reference, the correct
 * variants, the hand-written bugs and AST mutants of the reference. A mutant is kept only when
 * the examples or the probes (random valid inputs, never a held-out one) tell it apart from the
 * reference, run through the product sandbox. Building runs python, so callers cache the result.
 */
import { z } from 'zod';
import type { TestCase } from '../../../core/problem.js';
import { Rng } from '../../../core/rng.js';
import type { Sandbox } from '../../../sandbox/api.js';
import { defaultPython, mutantsOf } from './mutate.js';
import { buildProbes, runRequest } from './probes.js';
import type { CatalogSource } from './source.js';

export const CandidateKind = z.enum(['reference', 'variant', 'bug', 'mutant']);
export type CandidateKind = z.infer<typeof CandidateKind>;

export const ProgramCandidate = z.object({
  /** Stable within the problem: "ref", "var1", "bug:<name>", "mut:<k>". */
  candidateId: z.string().min(1),
  program: z.string().min(1),
  kind: CandidateKind,
  /** Written to be correct (reference, variants), or known to be wrong (bugs, mutants). */
  correct: z.boolean(),
  /** For mutants: which operator at which line ("cmp:Lt->LtE@7"). */
  note: z.string().optional(),
});
export type ProgramCandidate = z.infer<typeof ProgramCandidate>;

export interface ProgramCatalogOptions {
  /** Mutants kept per problem (default 8). */
  maxMutants?: number;
  /** Chooses which mutants are kept when more qualify (default 0). */
  seed?: number;
  /** Probe tests drawn to tell mutants from the reference (default 24). */
  probes?: number;
  /** Interpreter for the mutation script (the programs themselves run in the sandbox). */
  python?: string;
}

/** True when some test is not accepted; a sandbox failure is an error, never a kill. */
async function killed(source: CatalogSource, sandbox: Sandbox, program: string, tests: readonly TestCase[]): Promise<boolean> {
  const results = await sandbox.run(runRequest(source, program, tests, true));
  const broken = results.find((r) => r.verdict === 'sandbox_error');
  if (broken) throw new Error(`${source.problem.id}: the sandbox failed while checking a mutant: ${broken.message ?? 'no detail'}`);
  return results.some((r) => r.verdict !== 'accepted');
}

/** Hand-written programs first, then up to maxMutants mutants that fail an example or a probe. */
export async function buildProgramCatalog(source: CatalogSource, sandbox: Sandbox, opts: ProgramCatalogOptions = {}): Promise<ProgramCandidate[]> {
  const { problem, extras } = source;
  const reference = problem.solutions[0];
  if (!reference) throw new Error(`${problem.id}: no reference solution`);
  if (problem.style === 'assert') throw new Error(`${problem.id}: assert-style problems have no catalog`);
  const maxMutants = opts.maxMutants ?? 8;
  const seed = opts.seed ?? 0;
  const candidates: ProgramCandidate[] = [
    { candidateId: 'ref', program: reference, kind: 'reference', correct: true },
    ...extras.variants.map((program, i) => ({ candidateId: `var${i + 1}`, program, kind: 'variant' as const, correct: true })),
    ...extras.bugs.map((b) => ({ candidateId: `bug:${b.name}`, program: b.program, kind: 'bug' as const, correct: false })),
  ];
  if (maxMutants <= 0) return candidates;

  const mutants = await mutantsOf(reference, opts.python ?? defaultPython());
  const handWritten = new Set(candidates.map((c) => c.program.trim()));
  const pool = Rng.derive(seed, problem.id, 'mutants').shuffle(mutants.filter((m) => !handWritten.has(m.source.trim())));
  const tests = [...source.examples, ...(await buildProbes(source, sandbox, opts.probes ?? 24, seed))];
  const kept: typeof pool = [];
  // In chunks, checked concurrently: most problems fill the cap from the first chunk.
  for (let at = 0; at < pool.length && kept.length < maxMutants; at += maxMutants * 2) {
    const chunk = pool.slice(at, at + maxMutants * 2);
    const verdicts = await Promise.all(chunk.map((m) => killed(source, sandbox, m.source, tests)));
    chunk.forEach((m, j) => {
      if (verdicts[j] && kept.length < maxMutants) kept.push(m);
    });
  }
  kept.forEach((m, k) => candidates.push({ candidateId: `mut:${k + 1}`, program: m.source, kind: 'mutant', correct: false, note: m.op }));
  return candidates;
}
