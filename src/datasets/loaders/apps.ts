/**
 * APPS, in either layout: Hugging Face rows (JSON lines or Parquet; problem_id, question,
 * solutions and input_output as JSON text, starter_code, difficulty, url), or the original
 * one-folder-per-problem layout (question.txt, input_output.json, solutions.json, metadata.json,
 * starter_code.py, and CodeRL's gen_solutions.json whose programs labelled `result: false` are
 * kept as incorrect solutions).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { ProblemInput } from '../../core/problem.js';
import { isParquetSource, readRecords, type RawRecord } from '../records.js';
import { parseRow, unique } from './common.js';
import { programList, testsFromInputOutput } from './inputOutput.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const AppsRow = z.object({
  problem_id: z.union([z.number().int(), z.string().min(1)]),
  question: z.string(),
  solutions: z.unknown().optional(),
  input_output: z.unknown(),
  starter_code: z.string().nullable().optional(),
  difficulty: z.string().nullable().optional(),
  url: z.string().nullable().optional(),
  /** Folder layout only: programs known to give wrong answers. */
  incorrect_solutions: z.array(z.string()).optional(),
});

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** One problem folder as an HF-style row; a file that is not valid JSON rejects only this row. */
async function folderRow(dir: string, name: string): Promise<unknown> {
  const file = (f: string) => readOptional(join(dir, f));
  const question = await file('question.txt');
  if (question === undefined) throw new RowRejected(`${name}: no question.txt`, name);
  const json = async (f: string): Promise<unknown> => {
    const text = await file(f);
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new RowRejected(`${name}/${f} is not valid JSON: ${(err as Error).message}`, name);
    }
  };
  const metadata = ((await json('metadata.json')) ?? {}) as { difficulty?: string; url?: string };
  const generated = (await json('gen_solutions.json')) as { code?: unknown; result?: unknown }[] | undefined;
  const incorrect = Array.isArray(generated)
    ? generated.filter((g) => g && g.result === false && typeof g.code === 'string').map((g) => g.code as string)
    : undefined;
  return {
    problem_id: name,
    question,
    solutions: await json('solutions.json'),
    // As text: its call arguments are read as Python reads them (testsFromInputOutput).
    input_output: (await file('input_output.json')) ?? '',
    starter_code: await file('starter_code.py'),
    difficulty: metadata.difficulty,
    url: metadata.url,
    incorrect_solutions: incorrect,
  };
}

/** Rows of a folder layout: the folder itself when it holds question.txt, else its subfolders. */
async function* folderRows(path: string): AsyncGenerator<RawRecord> {
  const single = (await readOptional(join(path, 'question.txt'))) !== undefined;
  const dirs = single
    ? [{ dir: path, name: path.split(/[\\/]/).filter(Boolean).pop() ?? 'problem' }]
    : (await readdir(path, { withFileTypes: true }))
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .sort()
        .map((name) => ({ dir: join(path, name), name }));
  for (let index = 0; index < dirs.length; index++) {
    const { dir, name } = dirs[index]!;
    try {
      yield { index, value: await folderRow(dir, name) };
    } catch (err) {
      yield { index, error: (err as Error).message };
    }
  }
}

export const appsLoader: DatasetLoader = {
  format: 'apps',
  description: 'APPS: Hugging Face JSON lines, or the original one-folder-per-problem layout',
  defaultSource: 'apps',
  // APPS's harness runs each test with a 4 s timeout; memory is unstated.
  defaultLimits: { timeSeconds: 4, memoryMb: 1024 },
  async *rows(path: string) {
    // A folder of Parquet shards is rows, like a file; any other folder is the folder layout.
    if ((await stat(path).catch(() => undefined))?.isDirectory() && !(await isParquetSource(path))) yield* folderRows(path);
    else yield* readRecords(path);
  },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const row = parseRow(AppsRow, raw);
    const pid = String(row.problem_id);
    const starter = row.starter_code ?? undefined;
    const { style, entryPoint, tests } = testsFromInputOutput(row.input_output, starter, pid);
    return {
      id: `${ctx.source}/${pid}`,
      source: ctx.source,
      statement: row.question,
      starterCode: starter || undefined,
      style,
      entryPoint,
      tests: { public: [], private: tests, generated: [] },
      solutions: programList(row.solutions, 'solutions', pid),
      incorrectSolutions: unique(row.incorrect_solutions ?? []),
      limits: ctx.limits,
      difficulty: row.difficulty ?? undefined,
      tags: row.url ? [`url:${row.url}`] : [],
    };
  },
};
