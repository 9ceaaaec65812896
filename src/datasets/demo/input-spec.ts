/**
 * The typed description of a demo problem's input: which parameters, their types and stated
 * constraints, and (stdio) how they are laid out on lines. Type-aware test mutation reads
 * examples into typed values with it and prints mutated values back.
 */
import { z } from 'zod';

const name = z.string().regex(/^[a-z_][a-z0-9_]*$/i, 'a parameter name is an identifier');

export const IntParam = z.object({
  name,
  type: z.literal('int'),
  min: z.number().int(),
  max: z.number().int(),
});
export const IntListParam = z.object({
  name,
  type: z.literal('int[]'),
  min: z.number().int(),
  max: z.number().int(),
  minLen: z.number().int().nonnegative(),
  maxLen: z.number().int().nonnegative(),
  /** Stated constraints the random generator should respect (mutation may break them). */
  sorted: z.boolean().optional(),
  distinct: z.boolean().optional(),
});
export const StrParam = z.object({
  name,
  type: z.literal('str'),
  minLen: z.number().int().nonnegative(),
  maxLen: z.number().int().nonnegative(),
  /** Characters the constraints allow. */
  alphabet: z.string().min(1),
});
export const InputParam = z.discriminatedUnion('type', [IntParam, IntListParam, StrParam]);
export type InputParam = z.infer<typeof InputParam>;

/** One stdio line: tokens that are a parameter name or `len(name)` of a list/str parameter. */
const LineToken = z.string().regex(/^([a-z_][a-z0-9_]*|len\([a-z_][a-z0-9_]*\))$/i);

export const InputSpec = z
  .object({
    params: z.array(InputParam).min(1),
    /** stdio only: the input's lines, each a list of tokens. */
    stdio: z.array(z.array(LineToken)).optional(),
  })
  .superRefine((spec, ctx) => {
    const names = new Set(spec.params.map((p) => p.name));
    for (const line of spec.stdio ?? []) {
      for (const tok of line) {
        const ref = lenTarget(tok) ?? tok;
        if (!names.has(ref)) ctx.addIssue({ code: 'custom', message: `stdio token ${tok} names no parameter` });
      }
    }
  });
export type InputSpec = z.infer<typeof InputSpec>;

/** Typed input values by parameter name. */
export type InputValues = Record<string, number | number[] | string>;

function lenTarget(tok: string): string | null {
  const m = /^len\((.+)\)$/.exec(tok);
  return m ? (m[1] as string) : null;
}

function paramOf(spec: InputSpec, n: string): InputParam {
  const p = spec.params.find((q) => q.name === n);
  if (!p) throw new Error(`no parameter ${n}`);
  return p;
}

/** Reads a stdio input into typed values. Throws when the text does not fit the layout. */
export function parseStdio(spec: InputSpec, input: string): InputValues {
  if (!spec.stdio) throw new Error('input spec has no stdio layout');
  const lines = input.replace(/\r/g, '').split('\n');
  const values: InputValues = {};
  const lens: Record<string, number> = {};
  spec.stdio.forEach((layout, i) => {
    const line = lines[i] ?? '';
    const toks = line.split(/\s+/).filter(Boolean);
    let at = 0;
    for (const tok of layout) {
      const target = lenTarget(tok);
      if (target) {
        lens[target] = toInt(toks[at++], tok, i);
        continue;
      }
      const p = paramOf(spec, tok);
      if (p.type === 'int') values[tok] = toInt(toks[at++], tok, i);
      else if (p.type === 'int[]') {
        const count = lens[tok] ?? toks.length - at;
        values[tok] = toks.slice(at, at + count).map((t) => toInt(t, tok, i));
        at += count;
      } else {
        // A string takes the rest of its line as written (it may be empty).
        values[tok] = at === 0 ? line.trim() : toks.slice(at).join(' ');
        at = toks.length;
      }
    }
  });
  return values;
}

function toInt(tok: string | undefined, what: string, line: number): number {
  if (tok === undefined || !/^-?\d+$/.test(tok)) throw new Error(`line ${line + 1}: ${what} is not an integer (${tok})`);
  return Number(tok);
}

/** Prints typed values back in the stdio layout (one trailing newline). */
export function printStdio(spec: InputSpec, values: InputValues): string {
  if (!spec.stdio) throw new Error('input spec has no stdio layout');
  const lines = spec.stdio.map((layout) =>
    layout
      .map((tok) => {
        const target = lenTarget(tok);
        if (target) {
          const v = values[target];
          return String(Array.isArray(v) || typeof v === 'string' ? v.length : 0);
        }
        const v = values[tok];
        return Array.isArray(v) ? v.join(' ') : String(v);
      })
      .join(' '),
  );
  return `${lines.join('\n')}\n`;
}

/** Call-style: positional args <-> values by parameter order. */
export function argsToValues(spec: InputSpec, args: readonly unknown[]): InputValues {
  const values: InputValues = {};
  spec.params.forEach((p, i) => {
    values[p.name] = args[i] as number | number[] | string;
  });
  return values;
}

export function valuesToArgs(spec: InputSpec, values: InputValues): unknown[] {
  return spec.params.map((p) => values[p.name]);
}
