import { SandboxInputError } from './errors.js';
import { z } from 'zod';
import { TestCase, Comparison } from '../core/problem.js';

/** zod at the boundary: a malformed request is refused with the field that is wrong. */
export const RunRequestSchema = z.object({
  program: z.string(),
  tests: z.array(TestCase),
  entryPoint: z.string().min(1).optional(),
  limits: z
    .object({
      timeSeconds: z.number().positive().optional(),
      memoryMb: z.number().positive().optional(),
      wallSeconds: z.number().positive().optional(),
      outputBytes: z.number().int().positive().optional(),
      processes: z.number().int().positive().optional(),
    })
    .optional(),
  comparison: Comparison.optional(),
  checker: z.string().optional(),
  stopOnFirstFailure: z.boolean().optional(),
  prelude: z.boolean().optional(),
  role: z.enum(['candidate', 'reference']).optional(),
});

export function parseRunRequest(input: unknown): z.infer<typeof RunRequestSchema> {
  const r = RunRequestSchema.safeParse(input);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new SandboxInputError(`invalid run request at ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const styles = new Set(r.data.tests.map((t) => t.style));
  if (styles.size > 1) throw new SandboxInputError(`invalid run request at tests: mixed styles ${[...styles].join(', ')}`);
  if (r.data.comparison === 'checker' && !r.data.checker) {
    throw new SandboxInputError('invalid run request at checker: comparison "checker" needs checker source');
  }
  if (r.data.tests[0]?.style === 'call' && !r.data.entryPoint) {
    throw new SandboxInputError('invalid run request at entryPoint: call-style tests need a function name');
  }
  if (!r.data.entryPoint && r.data.tests.some((t) => t.style === 'assert' && /\bdef\s+check\s*\(/.test(t.code))) {
    throw new SandboxInputError('invalid run request at entryPoint: check(candidate) tests need the function to pass as candidate');
  }
  return r.data;
}
