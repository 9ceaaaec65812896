import { SandboxInputError } from './errors.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { TestCase, TestStyle } from '../core/problem.js';
import { parseJsonLossless } from './lossless-json.js';
import { inferStyle, parseTestObject } from './tests-file.js';

/** One line of a RUNS.jsonl batch (`crucible exec --batch`), as documented in src/sandbox/README.md. */
const BatchLine = z.strictObject({
  id: z.union([z.string().min(1), z.number().int()]),
  program: z.string().optional(),
  programFile: z.string().min(1).optional(),
  tests: z.array(z.unknown()).min(1),
  style: z.enum(['stdio', 'call', 'assert']).optional(),
  fn: z.string().min(1).optional(),
  limits: z.strictObject({ timeLimit: z.number().positive().optional(), memoryLimit: z.number().positive().optional() }).optional(),
});

export interface BatchRun {
  id: string | number;
  program: string;
  style: TestStyle;
  tests: TestCase[];
  fn?: string;
  limits: { timeSeconds?: number; memoryMb?: number };
}

/** Parses a whole batch file before anything runs; every error names the file, line and field. */
export function parseBatchFile(text: string, where: string): BatchRun[] {
  const runs: BatchRun[] = [];
  const ids = new Set<string>();
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n]!.trim();
    if (raw === '') continue;
    const at = `${where}:${n + 1}`;
    let obj: unknown;
    try {
      obj = parseJsonLossless(raw);
    } catch (e) {
      throw new SandboxInputError(`${at}: not valid JSON (${(e as Error).message})`);
    }
    const r = BatchLine.safeParse(obj);
    if (!r.success) {
      const issue = r.error.issues[0]!;
      throw new SandboxInputError(`${at}: ${issue.path.join('.') || 'line'}: ${issue.message}`);
    }
    const d = r.data;
    if ((d.program === undefined) === (d.programFile === undefined)) throw new SandboxInputError(`${at}: give exactly one of "program" and "programFile"`);
    const key = JSON.stringify(d.id);
    if (ids.has(key)) throw new SandboxInputError(`${at}: id: ${key} is used by an earlier line`);
    ids.add(key);
    let program = d.program;
    if (program === undefined) {
      const file = path.resolve(path.dirname(where), d.programFile!);
      try {
        program = readFileSync(file, 'utf8');
      } catch (e) {
        throw new SandboxInputError(`${at}: programFile: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
    }
    const first = d.tests[0];
    const style = d.style ?? (typeof first === 'object' && first !== null && !Array.isArray(first) ? inferStyle(first as Record<string, unknown>) : undefined);
    if (!style) throw new SandboxInputError(`${at}: tests.0: cannot tell the test style: give "style", or "input", "args" or "assert"`);
    const tests = d.tests.map((t, k) => parseTestObject(t, `${at}: tests.${k}`, style));
    if (style === 'call' && !d.fn) throw new SandboxInputError(`${at}: fn: call-style tests need a function name`);
    const limits: BatchRun['limits'] = {};
    if (d.limits?.timeLimit !== undefined) limits.timeSeconds = d.limits.timeLimit;
    if (d.limits?.memoryLimit !== undefined) limits.memoryMb = d.limits.memoryLimit;
    runs.push({ id: d.id, program, style, tests, ...(d.fn ? { fn: d.fn } : {}), limits });
  }
  if (runs.length === 0) throw new SandboxInputError(`${where}: no runs in the file`);
  return runs;
}
