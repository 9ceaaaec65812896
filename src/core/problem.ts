import { z } from 'zod';

/**
 * One problem record, whatever benchmark it came from. Every loader produces this shape and
 * every consumer (sandbox, actors, evaluation) reads only this shape.
 */

/** A test the sandbox can run. Expected values are optional: generated tests get their oracle
 * from the reference program (Code-A1) or have none at all (ACE). */
export const StdioTest = z.object({
  style: z.literal('stdio'),
  input: z.string(),
  /** Expected stdout; null when unknown. */
  output: z.string().nullable(),
});
export const CallTest = z.object({
  style: z.literal('call'),
  /** Positional arguments, JSON values. */
  args: z.array(z.unknown()),
  /** Expected return value (JSON); absent when unknown. */
  expected: z.unknown().optional(),
});
export const AssertTest = z.object({
  style: z.literal('assert'),
  /** Python source: one or more `assert` statements, or a HumanEval-style `check(candidate)` body. */
  code: z.string(),
});
export const TestCase = z.discriminatedUnion('style', [StdioTest, CallTest, AssertTest]);
export type TestCase = z.infer<typeof TestCase>;
export type StdioTest = z.infer<typeof StdioTest>;
export type CallTest = z.infer<typeof CallTest>;
export type AssertTest = z.infer<typeof AssertTest>;

export const TestStyle = z.enum(['stdio', 'call', 'assert']);
export type TestStyle = z.infer<typeof TestStyle>;

/** How a program's output is compared with the expected one. `checker` means several answers
 * are valid and a checker program decides. */
export const Comparison = z.enum(['exact', 'tokens', 'float', 'checker']);

export const Limits = z.object({
  timeSeconds: z.number().positive(),
  memoryMb: z.number().positive(),
});
export type Limits = z.infer<typeof Limits>;

export const Problem = z.object({
  /** Unique within its source, stable across imports (e.g. "humaneval/HumanEval/0"). */
  id: z.string().min(1),
  source: z.string().min(1),
  title: z.string().optional(),
  statement: z.string(),
  starterCode: z.string().optional(),
  style: TestStyle,
  /** Function to call: "add" for call/assert styles, "Solution.twoSum" for LeetCode classes. */
  entryPoint: z.string().optional(),
  tests: z.object({
    /** Shown in the statement: the adversary may see and mutate them. */
    public: z.array(TestCase),
    /** Held out: official evaluation only, never used for rewards. */
    private: z.array(TestCase),
    /** Produced by a generator (CodeContests generated tests, HumanEval+ plus inputs...). */
    generated: z.array(TestCase),
  }),
  /** Correct reference programs (Python 3). The first is the ground truth (GT). */
  solutions: z.array(z.string()),
  /** Known-incorrect programs (Python 3), for kill rate / mutation score. */
  incorrectSolutions: z.array(z.string()),
  limits: Limits,
  comparison: Comparison.default('tokens'),
  /** Python source of a checker when comparison is `checker`. */
  checker: z.string().optional(),
  difficulty: z.string().optional(),
  tags: z.array(z.string()).default([]),
});
export type Problem = z.infer<typeof Problem>;
export type ProblemInput = z.input<typeof Problem>;

/**
 * The test with a recorded output as its expected value: stdout for stdio tests, the JSON of the
 * returned value for call tests. Null when the output cannot stand as an expected value (a call
 * output that is not JSON, e.g. truncated) or the style has no separate expected value.
 */
export function withExpectedOutput(test: TestCase, output: string): TestCase | null {
  if (test.style === 'stdio') return { ...test, output };
  if (test.style !== 'call') return null;
  try {
    return { ...test, expected: JSON.parse(output) as unknown };
  } catch {
    return null;
  }
}
