/**
 * CodeContests (deepmind/code_contests, Hugging Face layout exported as JSON lines): public,
 * private and generated stdin/stdout tests; `solutions` / `incorrect_solutions` as parallel
 * `language` / `solution` lists, of which only Python 3 (language 3) is kept; time limit as
 * {seconds, nanos}; memory as bytes. Enum fields may be numbers or their proto names.
 */
import { z } from 'zod';
import type { ProblemInput, StdioTest } from '../../core/problem.js';
import { parseRow, unique, withLimits } from './common.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const Tests = z
  .object({ input: z.array(z.string()), output: z.array(z.string()) })
  .refine((t) => t.input.length === t.output.length, { message: 'input and output lists differ in length' });

const Solutions = z
  .object({ language: z.array(z.union([z.number().int(), z.string()])), solution: z.array(z.string()) })
  .refine((s) => s.language.length === s.solution.length, { message: 'language and solution lists differ in length' });

const Enum = z.union([z.number().int(), z.string()]);

const CodeContestsRow = z.object({
  name: z.string().min(1),
  description: z.string(),
  public_tests: Tests.nullable().optional(),
  private_tests: Tests.nullable().optional(),
  generated_tests: Tests.nullable().optional(),
  source: Enum.nullable().optional(),
  difficulty: Enum.nullable().optional(),
  solutions: Solutions.nullable().optional(),
  incorrect_solutions: Solutions.nullable().optional(),
  cf_tags: z.array(z.string()).nullable().optional(),
  cf_rating: z.number().nullable().optional(),
  time_limit: z
    .object({ seconds: z.number().default(0), nanos: z.number().default(0) })
    .nullable()
    .optional(),
  memory_limit_bytes: z.number().nullable().optional(),
  input_file: z.string().nullable().optional(),
  output_file: z.string().nullable().optional(),
});

/** The `Language` proto enum: 3 is PYTHON3 (1 is Python 2, not kept). */
const PYTHON3 = new Set<number | string>([3, 'PYTHON3']);
const SOURCES = ['unknown', 'codechef', 'codeforces', 'hackerearth', 'codejam', 'atcoder', 'aizu'];
/** The `Difficulty` proto enum: named levels, then Codeforces letters from 7 (A) on. */
const DIFFICULTIES = ['unknown', 'easy', 'medium', 'hard', 'harder', 'hardest', 'external'];

function enumName(value: number | string | null | undefined, names: string[], letters = false): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'string') return value.toLowerCase().replace(/_difficulty$|_source$/, '');
  if (value < names.length) return names[value];
  return letters && value - names.length < 26 ? String.fromCharCode(65 + value - names.length) : String(value);
}

const stdio = (t: z.infer<typeof Tests> | null | undefined): StdioTest[] =>
  t ? t.input.map((input, i) => ({ style: 'stdio', input, output: t.output[i]! })) : [];

const python3 = (s: z.infer<typeof Solutions> | null | undefined): string[] => (s ? unique(s.solution.filter((_, i) => PYTHON3.has(s.language[i]!))) : []);

export const codeContestsLoader: DatasetLoader = {
  format: 'codecontests',
  description: 'CodeContests JSON lines (Hugging Face layout; Python 3 solutions kept)',
  defaultSource: 'codecontests',
  defaultLimits: { timeSeconds: 2, memoryMb: 256 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const name = (raw as { name?: unknown } | null)?.name;
    const row = parseRow(CodeContestsRow, raw, typeof name === 'string' ? name : undefined);
    if (row.input_file || row.output_file) {
      throw new RowRejected(`reads ${row.input_file || row.output_file} instead of stdin/stdout: not supported`, row.name);
    }
    const tests = { public: stdio(row.public_tests), private: stdio(row.private_tests), generated: stdio(row.generated_tests) };
    if (tests.public.length + tests.private.length + tests.generated.length === 0) {
      throw new RowRejected('no tests', row.name);
    }
    const tl = row.time_limit ? row.time_limit.seconds + row.time_limit.nanos / 1e9 : undefined;
    const mem = row.memory_limit_bytes ? row.memory_limit_bytes / (1024 * 1024) : undefined;
    const source = enumName(row.source, SOURCES);
    return {
      id: `${ctx.source}/${row.name}`,
      source: ctx.source,
      title: row.name,
      statement: row.description,
      style: 'stdio',
      tests,
      solutions: python3(row.solutions),
      incorrectSolutions: python3(row.incorrect_solutions),
      limits: withLimits(ctx.limits, tl && tl > 0 ? tl : undefined, mem),
      difficulty: enumName(row.difficulty, DIFFICULTIES, true),
      tags: unique([...(row.cf_tags ?? []).filter(Boolean), ...(source ? [`platform:${source}`] : []), ...(row.cf_rating ? [`rating:${row.cf_rating}`] : [])]),
    };
  },
};
