/**
 * A problem's candidate programs for the catalog code policy: the reference, the correct
 * variants, the hand-written bugs and AST mutants of the reference. Building it needs python
 * (mutants are generated and then run to drop those equivalent to the reference), so callers
 * cache the result (the actors keep it in the blob store).
 */
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { DemoExtras } from '../../datasets/demo/index.js';
import { expectedOf, runnerTest } from '../../datasets/demo/check.js';
import { defaultPython, outcomeMatches, runBatch, runPythonJson } from '../../datasets/demo/runner.js';
import type { Problem } from '../../datasets/problem.js';
import { rngFor, shuffled } from '../rng.js';

export const CandidateKind = z.enum(['reference', 'variant', 'bug', 'mutant']);
export type CandidateKind = z.infer<typeof CandidateKind>;

export const ProgramCandidate = z.object({
  /** Stable within the problem: "ref", "var1", "bug:<name>", "mut:<k>". */
  candidateId: z.string().min(1),
  program: z.string().min(1),
  kind: CandidateKind,
  /** Correct on every valid input as far as the held-out tests tell. */
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
  python?: string;
}

const MUTATE = fileURLToPath(new URL('./mutate.py', import.meta.url));
const MutateReply = z.object({
  reference: z.string(),
  mutants: z.array(z.object({ op: z.string(), source: z.string() })),
});

function runMutator(program: string, python: string): Promise<z.infer<typeof MutateReply>> {
  return runPythonJson(python, MUTATE, { program }, MutateReply, 'mutate.py');
}

/** Builds the candidate list: hand-written programs first, then up to maxMutants mutants that
 * fail at least one example or held-out test (a mutant that passes all is not "buggy"). */
export async function buildProgramCatalog(
  problem: Problem,
  extras: DemoExtras,
  opts: ProgramCatalogOptions = {},
): Promise<ProgramCandidate[]> {
  const reference = problem.solutions[0];
  if (!reference) throw new Error(`${problem.id}: no reference solution`);
  if (problem.style === 'assert') throw new Error(`${problem.id}: assert-style problems have no catalog`);
  const style = problem.style;
  const python = opts.python ?? defaultPython();
  const maxMutants = opts.maxMutants ?? 8;
  const candidates: ProgramCandidate[] = [
    { candidateId: 'ref', program: reference, kind: 'reference', correct: true },
    ...extras.variants.map((program, i) => ({ candidateId: `var${i + 1}`, program, kind: 'variant' as const, correct: true })),
    ...extras.bugs.map((b) => ({ candidateId: `bug:${b.name}`, program: b.program, kind: 'bug' as const, correct: false })),
  ];
  if (maxMutants <= 0) return candidates;

  const { mutants } = await runMutator(reference, python);
  const handWritten = new Set(candidates.map((c) => c.program.trim()));
  const pool = shuffled(rngFor(opts.seed ?? 0, problem.id, 'mutants'), mutants.filter((m) => !handWritten.has(m.source.trim())));
  const tests = [...problem.tests.public, ...problem.tests.private];
  const kept: { op: string; source: string }[] = [];
  // Evaluate in chunks: most problems fill the cap from the first chunk.
  for (let at = 0; at < pool.length && kept.length < maxMutants; at += maxMutants * 2) {
    const chunk = pool.slice(at, at + maxMutants * 2);
    const results = await runBatch(
      chunk.map((m) => ({
        program: m.source, style, entryPoint: problem.entryPoint, tests: tests.map(runnerTest),
        timeSeconds: problem.limits.timeSeconds, memoryMb: problem.limits.memoryMb, stopOnTimeout: true,
      })),
      { python },
    );
    chunk.forEach((m, j) => {
      const passesAll = tests.every((t, i) => outcomeMatches(style, results[j]![i]!, expectedOf(t)));
      if (!passesAll && kept.length < maxMutants) kept.push(m);
    });
  }
  kept.forEach((m, k) => candidates.push({ candidateId: `mut:${k + 1}`, program: m.source, kind: 'mutant', correct: false, note: m.op }));
  return candidates;
}
