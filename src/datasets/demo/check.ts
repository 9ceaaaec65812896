/**
 * Checks a demo problem with real python: how each of its programs does on the examples and
 * the held-out tests, and whether the reference rejects the out-of-constraint inputs.
 * `npx tsx src/datasets/demo/check.ts` prints the table (a reviewer's view of the data).
 */
import type { TestCase } from '../../core/problem.js';
import type { Sandbox, TestResult } from '../../sandbox/api.js';
import { loadDemo, type DemoProblem } from './index.js';

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

function noSandboxError(problemId: string, results: readonly TestResult[]): readonly TestResult[] {
  const broken = results.find((r) => r.verdict === 'sandbox_error');
  if (broken) throw new Error(`${problemId}: the sandbox failed: ${broken.message ?? 'no detail'}`);
  return results;
}

/** Runs every hand-written program of a problem on its examples and held-out tests, and the
 * reference on its out-of-constraint inputs, through the sandbox. */
export async function checkDemoProblem(d: DemoProblem, sandbox: Sandbox): Promise<ProblemCheck> {
  const { problem, extras } = d;
  const tests = [...problem.tests.public, ...problem.tests.private];
  const programs: { name: string; kind: ProgramCheck['kind']; program: string }[] = [
    { name: 'ref', kind: 'reference', program: problem.solutions[0] as string },
    ...extras.variants.map((program, i) => ({ name: `var${i + 1}`, kind: 'variant' as const, program })),
    ...extras.bugs.map((b) => ({ name: `bug:${b.name}`, kind: 'bug' as const, program: b.program })),
  ];
  const run = async (program: string, ts: readonly TestCase[], role: 'candidate' | 'reference' = 'candidate') =>
    noSandboxError(
      problem.id,
      await sandbox.run({ program, role, tests: ts, entryPoint: problem.entryPoint, limits: problem.limits, comparison: problem.comparison }),
    );
  const nPub = problem.tests.public.length;
  const [invalid, ...perProgram] = await Promise.all([run(programs[0]!.program, extras.invalid, 'reference'), ...programs.map((p) => run(p.program, tests))]);
  return {
    problemId: problem.id,
    examples: nPub,
    heldout: problem.tests.private.length,
    programs: programs.map((p, j) => {
      const ok = new Array<boolean>(tests.length).fill(false);
      for (const r of perProgram[j]!) ok[r.test] = r.verdict === 'accepted';
      return {
        name: p.name,
        kind: p.kind,
        examplesPassed: ok.slice(0, nPub).filter(Boolean).length,
        heldoutPassed: ok.slice(nPub).filter(Boolean).length,
      };
    }),
    invalidRejected: extras.invalid.map((_, i) => invalid!.find((r) => r.test === i)?.verdict === 'runtime_error'),
  };
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const { createSandbox } = await import('../../sandbox/index.js');
  const sandbox = await createSandbox();
  try {
    for (const d of loadDemo().filter((x) => only.length === 0 || only.some((o) => x.problem.id.includes(o)))) {
      const c = await checkDemoProblem(d, sandbox);
      const cells = c.programs.map((p) => `${p.name} ${p.examplesPassed}/${c.examples} ${p.heldoutPassed}/${c.heldout}`);
      process.stdout.write(`${c.problemId}: invalid ${c.invalidRejected.map((r) => (r ? 'R' : '!')).join('')} | ${cells.join(' | ')}\n`);
    }
  } finally {
    await sandbox.close();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  main().catch((e: Error) => {
    process.stderr.write(`check: ${e.message}\n`);
    process.exitCode = 1;
  });
}
