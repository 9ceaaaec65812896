import { SandboxInputError } from './errors.js';
import { z } from 'zod';
import type { TestCase, TestStyle } from '../core/problem.js';
import { parseJsonLossless } from './lossless-json.js';

/** The TESTS.jsonl format of `crucible exec` (documented in src/sandbox/README.md). */
const StdioLine = z.strictObject({ input: z.string(), output: z.string().nullable().optional() });
const CallLine = z.strictObject({ args: z.array(z.unknown()), expected: z.unknown().optional() });
const AssertLine = z.strictObject({ assert: z.string().min(1) });

export function inferStyle(line: Record<string, unknown>): TestStyle | undefined {
  if ('assert' in line) return 'assert';
  if ('args' in line) return 'call';
  if ('input' in line) return 'stdio';
  return undefined;
}

/** One test object of TESTS.jsonl (or of a batch line's `tests`), checked against its style. */
export function parseTestObject(obj: unknown, at: string, style: TestStyle): TestCase {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) throw new SandboxInputError(`${at}: expected a JSON object`);
  const schema = style === 'stdio' ? StdioLine : style === 'call' ? CallLine : AssertLine;
  const r = schema.safeParse(obj);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new SandboxInputError(`${at}: ${style} test: ${issue.path.join('.') || 'line'}: ${issue.message}`);
  }
  const d = r.data as Record<string, unknown>;
  if (style === 'stdio') return { style: 'stdio', input: d.input as string, output: (d.output as string | null | undefined) ?? null };
  if (style === 'call')
    return 'expected' in d ? { style: 'call', args: d.args as unknown[], expected: d.expected } : { style: 'call', args: d.args as unknown[] };
  return { style: 'assert', code: d.assert as string };
}

/** Parses TESTS.jsonl; every error names the file, the line and the field. */
export function parseTestsFile(text: string, where: string, style?: TestStyle): { style: TestStyle; tests: TestCase[] } {
  const tests: TestCase[] = [];
  let chosen = style;
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n]!.trim();
    if (raw === '') continue;
    const at = `${where}:${n + 1}`;
    let obj: unknown;
    try {
      obj = parseJsonLossless(raw); // big integers stay exact (BigInt)
    } catch (e) {
      throw new SandboxInputError(`${at}: not valid JSON (${(e as Error).message})`);
    }
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) throw new SandboxInputError(`${at}: expected a JSON object`);
    chosen ??= inferStyle(obj as Record<string, unknown>);
    if (!chosen) throw new SandboxInputError(`${at}: cannot tell the test style: give "input", "args" or "assert"`);
    tests.push(parseTestObject(obj, at, chosen));
  }
  if (!chosen) throw new SandboxInputError(`${where}: no tests in the file`);
  return { style: chosen, tests };
}
