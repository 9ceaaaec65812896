/**
 * MBPP (google-research-datasets/mbpp, full or sanitized): a task text, a reference program and
 * three asserts. The first assert is public (it shows the signature, as MBPP prompts do); the rest
 * and the challenge asserts are private. Setup code / imports are prepended to every assert.
 */
import { z } from 'zod';
import type { AssertTest, ProblemInput } from '../../core/problem.js';
import { definesTopLevel, entryPointFromAsserts, firstFunction, parseRow } from './common.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const MbppRow = z
  .object({
    task_id: z.union([z.number().int(), z.string().min(1)]),
    text: z.string().optional(),
    prompt: z.string().optional(),
    code: z.string(),
    test_list: z.array(z.string()).min(1, 'needs at least one assert'),
    test_setup_code: z.string().default(''),
    test_imports: z.array(z.string()).default([]),
    challenge_test_list: z.array(z.string()).default([]),
  })
  .refine((r) => r.text !== undefined || r.prompt !== undefined, { message: 'needs text (full) or prompt (sanitized)' });

// MBPP's programs and asserts use CRLF line endings.
const lf = (s: string): string => s.replace(/\r\n?/g, '\n');

export const mbppLoader: DatasetLoader = {
  format: 'mbpp',
  description: 'MBPP JSON lines, full (text, test_setup_code) or sanitized (prompt, test_imports)',
  defaultSource: 'mbpp',
  defaultLimits: { timeSeconds: 3, memoryMb: 1024 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const row = parseRow(MbppRow, raw);
    const taskId = String(row.task_id);
    const code = lf(row.code);
    const asserts = row.test_list.map(lf);
    const entryPoint = entryPointFromAsserts(asserts) ?? firstFunction(code);
    if (!entryPoint) throw new RowRejected('cannot tell which function the asserts call', taskId);
    if (!definesTopLevel(code, entryPoint.split('.')[0]!)) {
      throw new RowRejected(`the reference program does not define ${entryPoint}, which the asserts call`, taskId);
    }
    const setup = [lf(row.test_setup_code).trim(), ...row.test_imports.map(lf)].filter(Boolean).join('\n');
    const test = (a: string): AssertTest => ({ style: 'assert', code: setup ? `${setup}\n${a.trim()}\n` : `${a.trim()}\n` });
    const [first, ...rest] = asserts;
    return {
      id: `${ctx.source}/${taskId}`,
      source: ctx.source,
      statement: lf(row.text ?? row.prompt ?? ''),
      style: 'assert',
      entryPoint,
      tests: {
        public: [test(first!)],
        private: [...rest, ...row.challenge_test_list.map(lf)].map(test),
        generated: [],
      },
      solutions: [code],
      incorrectSolutions: [],
      limits: ctx.limits,
    };
  },
};
