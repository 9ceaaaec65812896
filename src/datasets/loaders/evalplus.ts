/**
 * EvalPlus releases: HumanEval+ (`HumanEvalPlus.jsonl`) and MBPP+ (`MbppPlus.jsonl`). Tests are
 * inputs only (`base_input`, `plus_input`: one argument list each); their expected outputs come
 * from running the canonical solution (`crucible data import --oracle`, see oracle.ts). So the
 * loader emits call tests without `expected`: base inputs as private, plus inputs as generated.
 */
import { z } from 'zod';
import type { CallTest, ProblemInput } from '../../core/problem.js';
import { definesTopLevel, parseRow } from './common.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const Inputs = z.array(z.array(z.unknown()), { message: 'must be a list of argument lists' });

const EvalPlusRow = z.object({
  task_id: z.string().min(1),
  prompt: z.string(),
  entry_point: z.string().regex(/^[A-Za-z_]\w*$/, 'must be a Python identifier'),
  canonical_solution: z.string(),
  base_input: Inputs,
  plus_input: Inputs.default([]),
  atol: z.number().nonnegative().default(0),
});

const callTests = (inputs: unknown[][]): CallTest[] => inputs.map((args) => ({ style: 'call', args }));

function convertEvalPlus(raw: unknown, ctx: ConvertContext): ProblemInput {
  const id = (raw as { task_id?: unknown } | null)?.task_id;
  const row = parseRow(EvalPlusRow, raw, typeof id === 'string' ? id : undefined);
  if (row.base_input.length + row.plus_input.length === 0) {
    throw new RowRejected('no base_input or plus_input: nothing to test', row.task_id);
  }
  // HumanEval+ gives a function body to append to the prompt; MBPP+ gives a whole program.
  const solution = definesTopLevel(row.canonical_solution, row.entry_point) ? row.canonical_solution : row.prompt + row.canonical_solution;
  return {
    id: `${ctx.source}/${row.task_id}`,
    source: ctx.source,
    statement: row.prompt,
    starterCode: definesTopLevel(row.prompt, row.entry_point) ? row.prompt : undefined,
    style: 'call',
    entryPoint: row.entry_point,
    tests: { public: [], private: callTests(row.base_input), generated: callTests(row.plus_input) },
    solutions: [solution],
    incorrectSolutions: [],
    limits: ctx.limits,
    // EvalPlus compares floats with an absolute tolerance where atol > 0.
    comparison: row.atol > 0 ? 'float' : undefined,
  };
}

export const humanEvalPlusLoader: DatasetLoader = {
  format: 'humaneval-plus',
  description: 'HumanEval+ (EvalPlus HumanEvalPlus.jsonl: base_input / plus_input, outputs from the canonical solution)',
  defaultSource: 'humaneval-plus',
  defaultLimits: { timeSeconds: 4, memoryMb: 1024 },
  convert: convertEvalPlus,
};

export const mbppPlusLoader: DatasetLoader = {
  format: 'mbpp-plus',
  description: 'MBPP+ (EvalPlus MbppPlus.jsonl: base_input / plus_input, outputs from the canonical solution)',
  defaultSource: 'mbpp-plus',
  defaultLimits: { timeSeconds: 4, memoryMb: 1024 },
  convert: convertEvalPlus,
};
