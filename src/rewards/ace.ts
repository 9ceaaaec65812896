/**
 * ACE (solver-adversary self-evolution without ground truth). ACE publishes only an abstract;
 * these rules are our reading of it (METHODS.md) and every choice is an option.
 *
 * Tests are inputs without expected outputs, so a verdict says only whether a program ran
 * cleanly. A program "crashes" on a test with runtime_error, time_limit (a hang), memory_limit
 * or output_limit; accepted (and wrong_answer, should a checker report it) means it survived.
 * compile_error programs are left out: they fail before any input is read, whatever the test.
 * sandbox_error / not run cells are left out.
 *
 * Labels per test, for KTO:
 *   desirable   - it crashes or hangs at least one program;
 *   undesirable - every program with a verdict survives it;
 *   suspect     - it crashes every program (at least `minProgramsForSuspect` of them), or it
 *                 crashes a program known to be robust (e.g. the reference): the input is
 *                 probably outside the problem's constraints. `suspectLabel` decides what a
 *                 suspect test becomes (default: kept out of training as 'suspect');
 *   unknown     - no program has a verdict on it.
 * Programs for SFT: those that survive every test labelled desirable or undesirable (each such
 * cell must have a verdict), having at least one.
 */
import { z } from 'zod';
import type { Verdict } from '../core/verdicts.js';
import { type ExecutionMatrix, candidateIndices, cell, parseWith } from './matrix.js';

export const ACE_ID = 'ace/v1';

const CRASH_VERDICTS: ReadonlySet<Verdict> = new Set<Verdict>(['runtime_error', 'time_limit', 'memory_limit', 'output_limit']);

export type AceLabel = 'desirable' | 'undesirable' | 'suspect' | 'unknown';

export const AceOptions = z
  .object({
    /** What a suspect test is labelled for training. */
    suspectLabel: z.enum(['suspect', 'desirable', 'undesirable']).default('suspect'),
    /** An all-crash test is suspect only with at least this many programs observed. */
    minProgramsForSuspect: z.number().int().positive().default(2),
    /** Program ids known robust (reference solutions): a crash on one makes the test suspect. */
    robustPrograms: z.array(z.string()).default([]),
    /** Include reference programs of the matrix as robust programs. */
    referenceIsRobust: z.boolean().default(true),
  })
  .strict();
export type AceOptionsInput = z.input<typeof AceOptions>;

export interface AceTestLabel {
  test: string;
  label: AceLabel;
  /** Why it is suspect, when it is. */
  suspectBecause?: 'all_crash' | 'robust_crash';
  crashed: number;
  survived: number;
}

export interface AceResult {
  rewardId: typeof ACE_ID;
  tests: AceTestLabel[];
  /** Program ids selected for SFT, in matrix order. */
  sftPrograms: string[];
}

type CellClass = 'crash' | 'survive' | 'skip';

function classify(v: Verdict | null): CellClass {
  if (v === null || v === 'sandbox_error' || v === 'compile_error') return 'skip';
  return CRASH_VERDICTS.has(v) ? 'crash' : 'survive';
}

/** ACE labels for the given tests (default: all) over the non-reference programs. */
export function aceLabels(m: ExecutionMatrix, tests?: readonly number[], options: AceOptionsInput = {}): AceResult {
  const o = parseWith(AceOptions, options, 'ACE options');
  const ts = tests ?? m.tests.map((_, i) => i);
  const candidates = candidateIndices(m).filter((p) => !m.verdicts[p]!.includes('compile_error'));
  const robust = new Set(o.robustPrograms);
  const robustIdx = m.programs.flatMap((p, i) => ((o.referenceIsRobust && p.isReference) || robust.has(p.id) ? [i] : []));

  const labels: AceTestLabel[] = ts.map((t) => {
    let crashed = 0;
    let survived = 0;
    for (const p of candidates) {
      const c = classify(cell(m, p, t));
      if (c === 'crash') crashed++;
      else if (c === 'survive') survived++;
    }
    const robustCrash = robustIdx.some((p) => classify(cell(m, p, t)) === 'crash');
    const id = m.tests[t]!.id;
    let suspectBecause: AceTestLabel['suspectBecause'];
    if (robustCrash) suspectBecause = 'robust_crash';
    else if (crashed > 0 && survived === 0 && crashed >= o.minProgramsForSuspect) suspectBecause = 'all_crash';
    if (suspectBecause !== undefined) {
      return { test: id, label: o.suspectLabel, suspectBecause, crashed, survived };
    }
    if (crashed + survived === 0) return { test: id, label: 'unknown', crashed, survived };
    return { test: id, label: crashed > 0 ? 'desirable' : 'undesirable', crashed, survived };
  });

  // SFT: survive every test that is trained on as desirable/undesirable and not suspect.
  const judged = ts.filter((_, i) => {
    const l = labels[i]!;
    return l.suspectBecause === undefined && (l.label === 'desirable' || l.label === 'undesirable');
  });
  const sftPrograms =
    judged.length === 0 ? [] : candidates.filter((p) => judged.every((t) => classify(cell(m, p, t)) === 'survive')).map((p) => m.programs[p]!.id);
  return { rewardId: ACE_ID, tests: labels, sftPrograms };
}
