/**
 * zod schemas for the arguments of EventLog calls, shared by every backend so that a bad range,
 * filter or option is refused the same way everywhere.
 */
import { z } from 'zod';
import { InvalidLogArgumentError, summarizeIssues } from './errors.js';
import type { AppendOptions, ReadFilter, ReadRange, SubscribeOptions } from './log.js';

const Pos = z.int().nonnegative();
const Name = z.string().min(1);

// Compiled: append is a hot path (a generated fast path; failures re-run the parser for issues).
export const AppendOptionsSchema = z.compile(z.strictObject({ expectedPosition: Pos.optional(), commitId: Name }));
export const ReadRangeSchema = z.strictObject({ after: Pos.optional(), to: Pos.optional(), limit: Pos.optional() });
export const ReadFilterSchema = z.strictObject({
  runId: Name.optional(),
  types: z.array(Name).readonly().optional(),
  streams: z.array(Name).readonly().optional(),
  streamPrefix: Name.optional(),
});
export const SubscribeOptionsSchema = z.strictObject({ after: Pos.optional(), filter: ReadFilterSchema.optional() });
export const StreamName = z.compile(Name);

function check<T>(call: string, schema: z.ZodType<T>, value: unknown, prefix: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new InvalidLogArgumentError(call, summarizeIssues(r.error.issues, prefix));
  return r.data;
}

// Positions come out of zod as plain numbers; the schemas checked them, so they are positions again.
export const parseAppendArgs = (stream: unknown, options: unknown): { stream: string; options: AppendOptions } => ({
  stream: check('append', StreamName, stream, 'stream'),
  options: check('append', AppendOptionsSchema, options, 'options') as AppendOptions,
});
export const parseReadArgs = (range: unknown, filter: unknown): { range: ReadRange; filter: ReadFilter } => ({
  range: check('read', ReadRangeSchema, range ?? {}, 'range') as ReadRange,
  filter: check('read', ReadFilterSchema, filter ?? {}, 'filter'),
});
export const parseSubscribeOptions = (options: unknown): SubscribeOptions =>
  check('subscribe', SubscribeOptionsSchema, options ?? {}, 'options') as SubscribeOptions;
export const parseStreamName = (call: string, stream: unknown): string => check(call, StreamName, stream, 'stream');
