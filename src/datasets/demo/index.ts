/**
 * The bundled demo problems: one YAML file per problem under ./problems, loaded and validated
 * into the shared Problem record plus a side record of what only the catalog policy needs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { Problem, type TestCase } from '../../core/problem.js';
import type { InputSpec } from './input-spec.js';
import { DemoProblemFile, type DemoEntry } from './schema.js';

export const DEMO_DIR = fileURLToPath(new URL('./problems', import.meta.url));

export interface DemoExtras {
  problemId: string;
  /** Correct programs other than the reference (also in Problem.solutions after it). */
  variants: string[];
  /** Hand-written realistic bugs (also Problem.incorrectSolutions, in the same order). */
  bugs: { name: string; program: string }[];
  inputSpec: InputSpec;
  /** Inputs outside the constraints, on which the reference raises. */
  invalid: TestCase[];
}

export interface DemoProblem {
  problem: Problem;
  extras: DemoExtras;
  file: string;
}

/** Lists the problem files in a stable order. */
export function demoFiles(dir = DEMO_DIR): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => path.join(dir, f));
}

/** Parses and validates one file; errors name the file and the path inside it. */
export function readDemoFile(file: string): DemoProblemFile {
  let raw: unknown;
  try {
    raw = YAML.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${path.basename(file)}: not valid YAML: ${(e as Error).message}`);
  }
  const parsed = DemoProblemFile.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${path.basename(file)}: ${issue?.path.join('.') || '(root)'}: ${issue?.message}`);
  }
  return parsed.data;
}

function toTest(style: 'stdio' | 'call', e: DemoEntry, where: string, needExpected: boolean): TestCase {
  if (style === 'stdio') {
    const s = e as { input: string; output?: string };
    if (needExpected && s.output === undefined) throw new Error(`${where}: no expected output (run src/datasets/demo/build.ts)`);
    return { style: 'stdio', input: s.input, output: s.output ?? null };
  }
  const c = e as { args: unknown[]; expected?: unknown };
  if (needExpected && !('expected' in c)) throw new Error(`${where}: no expected value (run src/datasets/demo/build.ts)`);
  return needExpected ? { style: 'call', args: c.args, expected: c.expected } : { style: 'call', args: c.args };
}

/** Converts a validated file into the shared record and the side record. */
export function toDemoProblem(f: DemoProblemFile, file: string): DemoProblem {
  const base = path.basename(file);
  const tests = (part: 'examples' | 'heldout', need: boolean) => f[part].map((e, i) => toTest(f.style, e, `${base}: ${part}.${i}`, need));
  if (f.heldout.length < 10) throw new Error(`${base}: heldout: needs 10-20 tests, has ${f.heldout.length} (run build.ts)`);
  const problem = Problem.parse({
    id: f.id,
    source: 'demo',
    title: f.title,
    statement: f.statement,
    style: f.style,
    entryPoint: f.entryPoint,
    tests: { public: tests('examples', true), private: tests('heldout', true), generated: [] },
    solutions: [f.reference, ...f.variants],
    incorrectSolutions: f.bugs.map((b) => b.program),
    limits: f.limits,
    comparison: f.style === 'stdio' ? 'tokens' : 'exact',
    difficulty: f.difficulty,
    tags: f.tags,
  });
  const extras: DemoExtras = {
    problemId: f.id,
    variants: f.variants,
    bugs: f.bugs,
    inputSpec: f.input,
    invalid: f.invalid.map((e, i) => toTest(f.style, e, `${base}: invalid.${i}`, false)),
  };
  return { problem, extras, file };
}

/** The bundled set as parsed once per process (its files ship with the package and are never
 * written): YAML parsing costs more than a small run's whole orchestration. */
let bundled: DemoProblem[] | null = null;

/** Every demo problem with its extras, in file order. Ids are checked unique. Each call gets
 * its own copy. */
export function loadDemo(dir = DEMO_DIR): DemoProblem[] {
  if (dir !== DEMO_DIR) return parseDemoDir(dir);
  bundled ??= parseDemoDir(dir);
  return structuredClone(bundled);
}

function parseDemoDir(dir: string): DemoProblem[] {
  const out = demoFiles(dir).map((file) => toDemoProblem(readDemoFile(file), file));
  const seen = new Set<string>();
  for (const d of out) {
    if (seen.has(d.problem.id)) throw new Error(`${path.basename(d.file)}: duplicate id ${d.problem.id}`);
    seen.add(d.problem.id);
  }
  return out;
}

export function loadDemoProblems(dir = DEMO_DIR): Problem[] {
  return loadDemo(dir).map((d) => d.problem);
}

export function loadDemoExtras(dir = DEMO_DIR): DemoExtras[] {
  return loadDemo(dir).map((d) => d.extras);
}
