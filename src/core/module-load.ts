/**
 * How a program's module body went (Code-A1's valid-program marker), and the rules that read it
 * from the sandbox's verdicts: shared by the Executor that records it, the events that carry it
 * and the rewards that read it.
 */
import type { Verdict } from './verdicts.js';

/** How a program's module load went: the release prints a marker after the module body, so a
 * program is valid only when the body ran to the end. `unknown`: no probe verdict (the probe
 * was lost to a sandbox error, or the program is a stdin/stdout script whose body is the test
 * itself). */
export const MODULE_LOADS = ['ran', 'raised', 'compile_error', 'unknown'] as const;
export type ModuleLoad = (typeof MODULE_LOADS)[number];

/** The load of a program from the verdict of a probe test that does nothing after the module
 * body (any failure of the probe is a failure of the body). */
export function moduleLoadOf(probe: Verdict | null | undefined): ModuleLoad {
  if (probe === 'accepted') return 'ran';
  if (probe === 'compile_error') return 'compile_error';
  if (probe === 'sandbox_error' || probe === null || probe === undefined) return 'unknown';
  return 'raised';
}

/** The load of a program from its results on real tests (no probe): a failure the sandbox
 * places in phase 'load' is a failure of the module body; any other result that is not the
 * sandbox's own failure got past the body, so the body ran. */
export function moduleLoadOfResults(results: readonly { verdict: Verdict; phase?: 'load' | 'test' | undefined }[]): ModuleLoad {
  let ran = false;
  for (const r of results) {
    if (r.verdict === 'sandbox_error') continue;
    if (r.phase === 'load') return r.verdict === 'compile_error' ? 'compile_error' : 'raised';
    ran = true;
  }
  return ran ? 'ran' : 'unknown';
}

/** Load outcomes from least to most telling of a failure. */
const LOAD_RANK: Record<ModuleLoad, number> = { unknown: 0, ran: 1, raised: 2, compile_error: 3 };

/** Folds one more load outcome of a program into what is known: unknown never replaces an
 * outcome the sandbox told; two told outcomes that disagree (a module body that raised once,
 * e.g. out of time under load) keep the failure. Commutative, so what is known does not depend
 * on the order the executions were recorded in. */
export function mergeLoad(known: ModuleLoad | undefined, next: ModuleLoad): ModuleLoad {
  if (known === undefined) return next;
  return LOAD_RANK[next] > LOAD_RANK[known] ? next : known;
}
