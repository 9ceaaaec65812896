/**
 * Where a run's problems come from: a dataset file in one of the loader formats, a problem file
 * written by `crucible data import` (format `problems`), or the bundled demo set.
 */
import { DatasetError } from './errors.js';
import type { Problem } from '../core/problem.js';
import { getLoader, loadDataset, type LoadResult, type LoaderOptions } from './loaders/index.js';
import { readProblemFile } from './problemFile.js';

export type ProblemSourceSpec =
  { format: 'demo'; path?: string } | { format: 'problems'; path: string } | { format: string; path: string; options?: LoaderOptions };

async function loadDemo(): Promise<Problem[]> {
  let mod: { loadDemoProblems?: () => Problem[] | Promise<Problem[]> };
  try {
    mod = await import('./demo/index.js');
  } catch (err) {
    throw new DatasetError(`the demo problem set is not available: ${(err as Error).message}`);
  }
  if (typeof mod.loadDemoProblems !== 'function') throw new DatasetError('the demo problem set is not available');
  return mod.loadDemoProblems();
}

/** Loads every problem of a source; rows or lines that could not be read are listed in `errors`. */
export async function loadProblemSource(spec: ProblemSourceSpec): Promise<LoadResult> {
  if (spec.format === 'demo') return { problems: await loadDemo(), errors: [] };
  if (!spec.path) throw new DatasetError(`dataset format "${spec.format}" needs a path`);
  if (spec.format === 'problems') {
    const file = await readProblemFile(spec.path);
    // Line 1 is the header: record i is on line i + 2 when the file has no blank lines.
    return { problems: file.problems, errors: file.errors.map((e) => ({ index: e.line - 2, line: e.line, reason: e.reason })) };
  }
  getLoader(spec.format);
  return loadDataset(spec.format, spec.path, 'options' in spec ? (spec.options ?? {}) : {});
}
