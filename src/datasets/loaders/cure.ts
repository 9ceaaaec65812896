/**
 * CURE's stdio JSON (Gen-Verse/CURE data/*.json): a JSON array of tasks with `question`,
 * `test_time_limit`, `example_input` / `example_output` (public) and `test_input` / `test_output`
 * (private), all stdin/stdout text. Rows carry no id field: the row index is the id.
 */
import { z } from 'zod';
import type { ProblemInput, StdioTest } from '../../core/problem.js';
import { parseRow, withLimits } from './common.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const Texts = z.array(z.string());

const CureRow = z
  .object({
    question: z.string(),
    test_time_limit: z.number().positive().nullable().optional(),
    example_input: Texts.default([]),
    example_output: Texts.default([]),
    test_input: Texts,
    test_output: Texts,
  })
  .refine((r) => r.example_input.length === r.example_output.length, { message: 'example_input and example_output differ in length' })
  .refine((r) => r.test_input.length === r.test_output.length, { message: 'test_input and test_output differ in length' });

const stdio = (inputs: string[], outputs: string[]): StdioTest[] => inputs.map((input, i) => ({ style: 'stdio', input, output: outputs[i]! }));

export const cureLoader: DatasetLoader = {
  format: 'cure',
  description: "CURE's stdio JSON (question, example_input/output, test_input/output, test_time_limit)",
  defaultSource: 'cure',
  defaultLimits: { timeSeconds: 1, memoryMb: 1024 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const key = String(ctx.index);
    const row = parseRow(CureRow, raw, key);
    if (row.test_input.length + row.example_input.length === 0) throw new RowRejected('no tests', key);
    return {
      id: `${ctx.source}/${key}`,
      source: ctx.source,
      statement: row.question,
      style: 'stdio',
      tests: { public: stdio(row.example_input, row.example_output), private: stdio(row.test_input, row.test_output), generated: [] },
      solutions: [],
      incorrectSolutions: [],
      limits: withLimits(ctx.limits, row.test_time_limit ?? undefined),
    };
  },
};
