/** The shape of one demo problem file (YAML), as a person writes and reviews it. */
import { z } from 'zod';
import { InputSpec } from './input-spec.js';

export const StdioEntry = z.object({
  input: z.string(),
  /** Expected stdout, written by build.ts from the reference (checked there for examples). */
  output: z.string().optional(),
});
export const CallEntry = z.object({
  args: z.array(z.unknown()),
  expected: z.unknown().optional(),
});
const Entry = z.union([StdioEntry, CallEntry]);

export const Bug = z.object({
  /** What the mistake is, e.g. "off-by-one-upper-bound"; used in candidate ids ("bug:<name>"). */
  name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'bug names are kebab-case'),
  program: z.string().min(1),
});

export const DemoProblemFile = z
  .object({
    id: z.string().regex(/^demo\/[a-z0-9-]+$/, 'ids look like demo/<kebab-name>'),
    title: z.string().min(1),
    style: z.enum(['stdio', 'call']),
    entryPoint: z.string().optional(),
    difficulty: z.string().optional(),
    tags: z.array(z.string()).default([]),
    limits: z.object({ timeSeconds: z.number().positive(), memoryMb: z.number().positive() }),
    statement: z.string().min(1),
    input: InputSpec,
    reference: z.string().min(1),
    variants: z.array(z.string().min(1)).min(1).max(2),
    bugs: z.array(Bug).min(3).max(6),
    examples: z.array(Entry).min(2).max(3),
    heldout: z.array(Entry).max(20),
    /** Inputs outside the stated constraints: the reference must raise on each. */
    invalid: z.array(Entry).min(1),
  })
  .superRefine((f, ctx) => {
    if (f.style === 'call' && !f.entryPoint) ctx.addIssue({ code: 'custom', message: 'call-style problems need entryPoint', path: ['entryPoint'] });
    if (f.style === 'stdio' && !f.input.stdio) ctx.addIssue({ code: 'custom', message: 'stdio problems need input.stdio', path: ['input', 'stdio'] });
    const key = f.style === 'stdio' ? 'input' : 'args';
    for (const part of ['examples', 'heldout', 'invalid'] as const) {
      f[part].forEach((e, i) => {
        if (!(key in e)) ctx.addIssue({ code: 'custom', message: `a ${f.style} test needs "${key}"`, path: [part, i] });
      });
    }
    const names = f.bugs.map((b) => b.name);
    if (new Set(names).size !== names.length) ctx.addIssue({ code: 'custom', message: 'bug names must be unique', path: ['bugs'] });
  });
export type DemoProblemFile = z.infer<typeof DemoProblemFile>;
export type DemoEntry = z.infer<typeof Entry>;
