/**
 * Checks a demo problem with real python: how each of its programs does on the examples and
 * the held-out tests, and whether the reference rejects the out-of-constraint inputs.
 * `npx tsx src/datasets/demo/check.ts` prints the table (a reviewer's view of the data).
 */
import type { TestCase } from '../problem.js';
import { loadDemo, type DemoProblem } from './index.js';
import { outcomeMatches, runBatch, type RunnerJob, type RunnerTest, type RunBatchOptions } from './runner.js';

export interface ProgramCheck {
  name: string;
  kind: 'reference' | 'variant' | 'bug';
  examplesPassed: number;
  heldoutPassed: number;
}

export interface ProblemCheck {
  problemId: string;
  examples: number;
  heldout: number;
  programs: ProgramCheck[];
  /** Per invalid input: did the reference raise? */
  invalidRejected: boolean[];
}

export function runnerTest(t: TestCase): RunnerTest {
  if (t.style === 'stdio') return { input: t.input };
  if (t.style === 'call') return { args: t.args };
  throw new Error('assert-style tests are not used by the demo');
}

export function expectedOf(t: TestCase): unknown {
  if (t.style === 'stdio') return t.output;
  if (t.style === 'call') return t.expected;
  return undefined;
}

export async function checkDemoProblem(d: DemoProblem, opts: RunBatchOptions = {}): Promise<ProblemCheck> {
  const { problem, extras } = d;
  const style = problem.style as 'stdio' | 'call';
  const tests = [...problem.tests.public, ...problem.tests.private];
  const programs: { name: string; kind: ProgramCheck['kind']; program: string }[] = [
    { name: 'ref', kind: 'reference', program: problem.solutions[0] as string },
    ...extras.variants.map((program, i) => ({ name: `var${i + 1}`, kind: 'variant' as const, program })),
    ...extras.bugs.map((b) => ({ name: `bug:${b.name}`, kind: 'bug' as const, program: b.program })),
  ];
  const job = (program: string, ts: TestCase[], stopOnTimeout = false): RunnerJob => ({
    program, style, entryPoint: problem.entryPoint, tests: ts.map(runnerTest),
    timeSeconds: problem.limits.timeSeconds, memoryMb: problem.limits.memoryMb, stopOnTimeout,
  });
  // A too-slow bug has shown that it fails once it times out: its other tests count as failed.
  const jobs = [...programs.map((p) => job(p.program, tests, p.kind === 'bug')), job(programs[0]!.program, extras.invalid)];
  const results = await runBatch(jobs, opts);
  const nPub = problem.tests.public.length;
  return {
    problemId: problem.id,
    examples: nPub,
    heldout: problem.tests.private.length,
    programs: programs.map((p, j) => {
      const ok = tests.map((t, i) => outcomeMatches(style, results[j]![i]!, expectedOf(t)));
      return {
        name: p.name, kind: p.kind,
        examplesPassed: ok.slice(0, nPub).filter(Boolean).length,
        heldoutPassed: ok.slice(nPub).filter(Boolean).length,
      };
    }),
    invalidRejected: results[programs.length]!.map((o) => o.status === 'error'),
  };
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  for (const d of loadDemo().filter((x) => only.length === 0 || only.some((o) => x.problem.id.includes(o)))) {
    const c = await checkDemoProblem(d, { workers: 2 });
    const cells = c.programs.map((p) => `${p.name} ${p.examplesPassed}/${c.examples} ${p.heldoutPassed}/${c.heldout}`);
    process.stdout.write(`${c.problemId}: invalid ${c.invalidRejected.map((r) => (r ? 'R' : '!')).join('')} | ${cells.join(' | ')}\n`);
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  main().catch((e: Error) => {
    process.stderr.write(`check: ${e.message}\n`);
    process.exitCode = 1;
  });
}
