/**
 * APPS / TACO `input_output`: `{inputs, outputs, fn_name?}`. With `fn_name` the tests are calls
 * (each input is an argument list); without, stdin/stdout text.
 *
 * Call-based expected outputs are sometimes wrapped in a one-element list (`[[false], [true]]`)
 * and sometimes not (`[9]`); APPS's harness accepts either. We unwrap only when every output of the
 * problem is a one-element list, which is how the wrapping shows up in those datasets.
 */
import { z } from 'zod';
import type { TestCase } from '../../core/problem.js';
import { asText, entryPointFor, formatIssues, jsonField, valuesField } from './common.js';
import { RowRejected } from './types.js';

const InputOutput = z.object({
  inputs: z.array(z.unknown()),
  outputs: z.array(z.unknown()),
  fn_name: z.string().min(1).optional().nullable(),
});

export interface ParsedTests {
  style: 'stdio' | 'call';
  entryPoint?: string;
  tests: TestCase[];
}

const isWrapped = (outputs: unknown[]): boolean => outputs.length > 0 && outputs.every((o) => Array.isArray(o) && o.length === 1);

/** Parses `input_output` (JSON text or already parsed) into tests. */
export function testsFromInputOutput(value: unknown, starterCode: string | undefined, id: string): ParsedTests {
  if (value === '' || value === null || value === undefined) throw new RowRejected('input_output is empty: no tests', id);
  const parsed = typeof value === 'string' ? valuesField(value, 'input_output', id) : value;
  const result = InputOutput.safeParse(parsed);
  if (!result.success) throw new RowRejected(`input_output: ${formatIssues(result.error)}`, id);
  const { inputs, outputs, fn_name } = result.data;
  if (inputs.length !== outputs.length) {
    throw new RowRejected(`input_output has ${inputs.length} inputs but ${outputs.length} outputs`, id);
  }
  if (inputs.length === 0) throw new RowRejected('input_output has no tests', id);
  if (fn_name) {
    const unwrap = isWrapped(outputs);
    const tests = inputs.map((args, i): TestCase => {
      if (!Array.isArray(args)) throw new RowRejected(`input_output.inputs.${i}: a call test needs an argument list`, id);
      return { style: 'call', args, expected: unwrap ? (outputs[i] as unknown[])[0] : outputs[i] };
    });
    return { style: 'call', entryPoint: entryPointFor(fn_name, starterCode), tests };
  }
  const tests = inputs.map((input, i): TestCase => ({
    style: 'stdio',
    input: asText(input, `input_output.inputs.${i}`, id),
    output: asText(outputs[i], `input_output.outputs.${i}`, id),
  }));
  return { style: 'stdio', tests };
}

/** `solutions` as JSON text of a list of programs, or the list itself. */
export function programList(value: unknown, field: string, id: string): string[] {
  if (value === undefined || value === null || value === '') return [];
  const parsed = typeof value === 'string' ? jsonField(value, field, id) : value;
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === 'string')) {
    throw new RowRejected(`${field} must be a list of program texts`, id);
  }
  return parsed;
}
