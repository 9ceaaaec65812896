/**
 * HumanEval (openai/human-eval `HumanEval.jsonl(.gz)`): prompt + canonical body, and a `test`
 * defining `check(candidate)`. The whole check is one assert-style test, kept as written: the
 * sandbox calls `check` on the entry point (so a run must pass `entryPoint`).
 */
import { z } from 'zod';
import type { ProblemInput } from '../../core/problem.js';
import { parseRow } from './common.js';
import type { ConvertContext, DatasetLoader } from './types.js';

const HumanEvalRow = z.object({
  task_id: z.string().min(1),
  prompt: z.string(),
  entry_point: z.string().regex(/^[A-Za-z_]\w*$/, 'must be a Python identifier'),
  canonical_solution: z.string(),
  test: z.string().includes('def check(', { message: 'must define check(candidate)' }),
});

export const humanEvalLoader: DatasetLoader = {
  format: 'humaneval',
  description: 'HumanEval JSON lines (task_id, prompt, canonical_solution, test with check(candidate))',
  defaultSource: 'humaneval',
  // human-eval's own harness gives the whole check 3 s.
  defaultLimits: { timeSeconds: 3, memoryMb: 1024 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const row = parseRow(HumanEvalRow, raw);
    return {
      id: `${ctx.source}/${row.task_id}`,
      source: ctx.source,
      statement: row.prompt,
      starterCode: row.prompt,
      style: 'assert',
      entryPoint: row.entry_point,
      tests: {
        public: [],
        private: [{ style: 'assert', code: row.test }],
        generated: [],
      },
      solutions: [row.prompt + row.canonical_solution],
      incorrectSolutions: [],
      limits: ctx.limits,
    };
  },
};
