/** Small parsing helpers shared by the loaders. Pure functions. */
import type { z } from 'zod';
import type { Limits } from '../../core/problem.js';
import { RowRejected } from './types.js';
import { parseJsonValues } from '../../sandbox/lossless-json.js';

/** One line per zod issue: `path: message`. */
export function formatIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(row)'}: ${issue.message}`).join('; ');
}

/** Validates a raw row against its format's schema, or rejects the row saying what is wrong. */
export function parseRow<S extends z.ZodType>(schema: S, value: unknown, id?: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new RowRejected(formatIssues(result.error), id);
  return result.data;
}

/** Parses a field that holds JSON text (APPS/TACO `input_output`, LiveCodeBench tests...). */
export function jsonField(text: string, field: string, id?: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new RowRejected(`${field} is not valid JSON: ${(err as Error).message}`, id);
  }
}

/** Parses a field of test values (call arguments, expected values) as Python reads them: a whole
 * float stays a float (`3.0` is not the int 3) and an integer past 2^53 stays exact. */
export function valuesField(text: string, field: string, id?: string): unknown {
  try {
    return parseJsonValues(text);
  } catch (err) {
    throw new RowRejected(`${field} is not valid JSON: ${(err as Error).message}`, id);
  }
}

/** A LeetCode-style `class Solution` starter means the function is a method of Solution. */
export function entryPointFor(fnName: string, starterCode?: string): string {
  if (fnName.includes('.')) return fnName;
  return starterCode && /^\s*class\s+Solution\b/m.test(starterCode) ? `Solution.${fnName}` : fnName;
}

/** Stdio test data is sometimes a list of lines instead of one string. */
export function asText(value: unknown, what: string, id?: string): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((x) => typeof x === 'string')) {
    return value.map((line) => (line.endsWith('\n') ? line : `${line}\n`)).join('');
  }
  throw new RowRejected(`${what} must be a string or a list of lines, got ${describe(value)}`, id);
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `a list of ${value.length}`;
  return typeof value;
}

/** "2 seconds", "1.5 second", "2000 ms", 3 -> seconds; undefined when absent or unreadable. */
export function parseSeconds(value: unknown): number | undefined {
  if (typeof value === 'number') return value > 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /([\d.]+)\s*(ms|millisecond|s|sec|second)?/i.exec(value);
  if (!m) return undefined;
  const n = Number(m[1]);
  if (!(n > 0)) return undefined;
  return m[2] && /^m/i.test(m[2]) ? n / 1000 : n;
}

/** "256 megabytes", "256.0 MB", "1 GB", "65536 kilobytes" -> MB; undefined when unreadable. */
export function parseMegabytes(value: unknown): number | undefined {
  if (typeof value === 'number') return value > 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /([\d.]+)\s*(k|m|g)?/i.exec(value);
  if (!m) return undefined;
  const n = Number(m[1]);
  if (!(n > 0)) return undefined;
  const unit = (m[2] ?? 'm').toLowerCase();
  return unit === 'k' ? n / 1024 : unit === 'g' ? n * 1024 : n;
}

export function withLimits(base: Limits, time?: number, memory?: number): Limits {
  return { timeSeconds: time ?? base.timeSeconds, memoryMb: memory ?? base.memoryMb };
}

export const unique = <T>(items: readonly T[]): T[] => [...new Set(items)];

const WRAPPERS = new Set([
  'set',
  'sorted',
  'list',
  'tuple',
  'abs',
  'round',
  'len',
  'str',
  'int',
  'float',
  'bool',
  'dict',
  'frozenset',
  'isinstance',
  'all',
  'any',
  'sum',
  'min',
  'max',
  'math.isclose',
  'isclose',
  'type',
]);

/** The entry point most asserts call, skipping wrappers like set(...) or math.isclose(...). */
export function entryPointFromAsserts(asserts: readonly string[]): string | undefined {
  const counts = new Map<string, number>();
  for (const a of asserts) {
    for (const m of a.matchAll(/([A-Za-z_][\w.]*)\s*\(/g)) {
      const name = m[1]!;
      if (WRAPPERS.has(name) || name === 'assert') continue;
      counts.set(name, (counts.get(name) ?? 0) + 1);
      break;
    }
  }
  let best: string | undefined;
  for (const [name, n] of counts) if (best === undefined || n > counts.get(best)!) best = name;
  return best;
}

/** The first top-level `def name(` of a program. */
export function firstFunction(code: string): string | undefined {
  return /^def\s+([A-Za-z_]\w*)\s*\(/m.exec(code)?.[1];
}

/** Whether a program defines `name` at top level (function or class). */
export function definesTopLevel(code: string, name: string): boolean {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^(?:async\\s+)?(?:def|class)\\s+${escaped}\\b`, 'm').test(code);
}

/** Strings of a Python list literal such as TACO's "['Sorting', \"Greedy\"]". */
export function pythonStringList(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"/g)) out.push(m[1] ?? m[2] ?? '');
  return out;
}
