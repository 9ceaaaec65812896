/**
 * TACO (BAAI/TACO rows exported as JSON lines): question, solutions and input_output as JSON text,
 * starter_code, difficulty, tags as a Python list literal, time_limit / memory_limit as text
 * ("1 seconds", "256 megabytes"). TACO rows have no id: the row index is the id, which is also the
 * key of TACO's output_spj.jsonl (pass it with --spj to mark the problems that need a checker).
 */
import { z } from 'zod';
import type { ProblemInput } from '../../core/problem.js';
import { readJsonRecords } from '../jsonl.js';
import { DatasetError } from '../errors.js';
import { parseMegabytes, parseRow, parseSeconds, pythonStringList, unique, withLimits } from './common.js';
import { programList, testsFromInputOutput } from './inputOutput.js';
import type { ConvertContext, DatasetLoader, SpecialJudgeInfo } from './types.js';

const Text = z.string().nullable().optional();

const TacoRow = z.object({
  question: z.string(),
  solutions: z.unknown().optional(),
  starter_code: Text,
  input_output: z.unknown(),
  difficulty: Text,
  name: Text,
  source: Text,
  url: Text,
  tags: z
    .union([z.string(), z.array(z.string())])
    .nullable()
    .optional(),
  skill_types: z
    .union([z.string(), z.array(z.string())])
    .nullable()
    .optional(),
  time_limit: z.union([z.string(), z.number()]).nullable().optional(),
  memory_limit: z.union([z.string(), z.number()]).nullable().optional(),
});

const tagList = (v: string | string[] | null | undefined): string[] => (v == null ? [] : Array.isArray(v) ? v : pythonStringList(v));

const SpjLine = z.object({ idx: z.number().int().nonnegative(), special_judge: z.boolean(), case: z.number().int().optional() });

/** Reads TACO's output_spj.jsonl: row index -> whether that problem needs a special judge. */
export async function readSpecialJudge(path: string): Promise<Map<number, SpecialJudgeInfo>> {
  const out = new Map<number, SpecialJudgeInfo>();
  for await (const rec of readJsonRecords(path)) {
    const parsed = SpjLine.safeParse(rec.value);
    if (rec.error || !parsed.success) {
      throw new DatasetError(`${path}: record ${rec.index + 1} is not {idx, special_judge, case}`);
    }
    out.set(parsed.data.idx, { specialJudge: parsed.data.special_judge, case: parsed.data.case });
  }
  return out;
}

export const tacoLoader: DatasetLoader = {
  format: 'taco',
  description: 'TACO JSON lines (input_output with optional fn_name; --spj output_spj.jsonl marks checker problems)',
  defaultSource: 'taco',
  defaultLimits: { timeSeconds: 4, memoryMb: 1024 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const row = parseRow(TacoRow, raw);
    const key = String(ctx.index);
    const starter = row.starter_code || undefined;
    const { style, entryPoint, tests } = testsFromInputOutput(row.input_output, starter, key);
    const spj = ctx.options.specialJudge?.get(ctx.index);
    const tags = unique([
      ...tagList(row.tags),
      ...tagList(row.skill_types).map((t) => `skill:${t}`),
      ...(row.source ? [`platform:${row.source}`] : []),
      ...(spj?.specialJudge ? ['special-judge', `spj-case:${spj.case ?? 0}`] : []),
    ]);
    return {
      id: `${ctx.source}/${key}`,
      source: ctx.source,
      title: row.name || undefined,
      statement: row.question,
      starterCode: starter,
      style,
      entryPoint,
      tests: { public: [], private: tests, generated: [] },
      solutions: programList(row.solutions, 'solutions', key),
      incorrectSolutions: [],
      limits: withLimits(ctx.limits, parseSeconds(row.time_limit), parseMegabytes(row.memory_limit)),
      // Several answers are valid: a checker decides (TACO ships none; `data check` says so).
      comparison: spj?.specialJudge ? 'checker' : undefined,
      difficulty: row.difficulty || undefined,
      tags,
    };
  },
};
