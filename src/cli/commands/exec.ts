import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { UserError } from '../errors.js';
import { createSandbox } from '../../sandbox/index.js';
import type { ComparisonMode, TestResult } from '../../sandbox/api.js';
import { parseTestsFile } from '../../sandbox/tests-file.js';
import { parseBatchFile, type BatchRun } from '../../sandbox/batch-file.js';
import { TestStyle } from '../../core/problem.js';

interface ExecOptions {
  tests?: string;
  batch?: string;
  workers?: string;
  style?: string;
  fn?: string;
  timeLimit?: string;
  memoryLimit?: string;
  comparison?: string;
  checker?: string;
  isolation?: string;
  python?: string;
  stopOnFailure?: boolean;
  json?: boolean;
}

const positive = (v: string | undefined, flag: string): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new UserError(`${flag} must be a positive number, got "${v}"`);
  return n;
};

const read = (file: string, what: string): string => {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read ${what} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
};

/** One JSON line per test, snake_case as documented in src/sandbox/README.md. */
export function resultLine(r: TestResult): Record<string, unknown> {
  const line: Record<string, unknown> = { test: r.test, verdict: r.verdict, time_ms: r.timeMs, memory_kb: r.memoryKb };
  if (r.wallMs !== undefined) line.wall_ms = r.wallMs;
  if (r.exceptionType) line.exception_type = r.exceptionType;
  if (r.message) line.message = r.message;
  if (r.output !== undefined) line.output = r.output;
  if (r.assertMode) line.assert_mode = r.assertMode;
  if (r.phase) line.phase = r.phase;
  if (r.memoryPeakKb !== undefined) line.memory_peak_kb = r.memoryPeakKb;
  line.isolated = r.isolated;
  if (r.cgroup !== undefined) line.cgroup = r.cgroup;
  return line;
}

/** Exit status from verdicts: 0 all accepted, 1 some not, 3 a sandbox error. */
function exitCode(results: TestResult[]): number {
  if (results.some((r) => r.verdict === 'sandbox_error')) return 3;
  return results.every((r) => r.verdict === 'accepted') ? 0 : 1;
}

/** `--batch`: every run through one shared pool, as a training run uses it. Runs start in file
 * order with a bounded number in flight (the pool queues and pipelines them); lines are
 * printed in file order, one per test, each with its run's id. */
async function runBatch(file: string, o: ExecOptions): Promise<void> {
  const runs: BatchRun[] = parseBatchFile(read(file, 'batch'), file);
  const workers = o.workers === undefined ? undefined : positive(o.workers, '--workers');
  if (workers !== undefined && !Number.isInteger(workers)) throw new UserError(`--workers must be a whole number, got "${o.workers}"`);
  if (!['exact', 'tokens', 'float'].includes(o.comparison ?? 'tokens')) throw new UserError('--batch supports --comparison exact, tokens or float');
  const sandbox = await createSandbox({ pythonPath: o.python, isolation: o.isolation as 'auto' | 'bwrap' | 'none', ...(workers ? { workers } : {}) });
  const all: TestResult[] = [];
  try {
    const window = Math.max(2, (workers ?? 4) * 4);
    const started: Array<Promise<TestResult[]>> = [];
    // A run that fails answers for itself (its tests' verdicts say why); the batch goes on.
    const start = (run: BatchRun): Promise<TestResult[]> =>
      sandbox
        .run({
          program: run.program,
          tests: run.tests,
          ...(run.fn ? { entryPoint: run.fn } : {}),
          limits: run.limits,
          comparison: (o.comparison ?? 'tokens') as ComparisonMode,
        })
        .catch((e: unknown) =>
          run.tests.map((_, test) => ({
            test,
            verdict: 'sandbox_error' as const,
            timeMs: 0,
            memoryKb: 0,
            isolated: sandbox.isolation === 'bwrap',
            message: `refused: ${(e as Error).message}`,
          })),
        );
    let next = 0;
    for (; next < Math.min(window, runs.length); next++) started.push(start(runs[next]!));
    for (let i = 0; i < runs.length; i++) {
      const results = await started[i]!;
      if (next < runs.length) started.push(start(runs[next++]!));
      for (const r of results) process.stdout.write(JSON.stringify({ run: runs[i]!.id, ...resultLine(r) }) + '\n');
      all.push(...results);
    }
    process.exitCode = exitCode(all);
  } finally {
    await sandbox.close();
  }
}

export function registerExec(program: Command): void {
  program
    .command('exec')
    .description('run a Python program on tests in the sandbox and print one verdict per test')
    .argument('[program]', 'Python 3 source file')
    .option('--tests <file>', 'TESTS.jsonl: one test per line')
    .option('--batch <file>', 'RUNS.jsonl: many programs with their tests, one JSON line per test printed')
    .option('--workers <n>', 'fork-servers for --batch (default: two per core)')
    .option('--style <style>', 'stdio | call | assert (default: from the first line)')
    .option('--fn <name>', 'function to call for call tests ("f" or "Solution.method")')
    .option('--time-limit <seconds>', 'CPU seconds per test')
    .option('--memory-limit <mb>', 'memory per test in MiB')
    .option('--comparison <mode>', 'exact | tokens | float | checker', 'tokens')
    .option('--checker <file>', 'Python file defining check(input, output, expected) -> bool')
    .option('--isolation <mode>', 'auto | bwrap | none', 'auto')
    .option('--python <path>', 'interpreter for the program', '/usr/bin/python3')
    .option('--stop-on-failure', 'stop at the first test that is not accepted')
    .option('--json', 'print one JSON line per test')
    .action(async (file: string | undefined, o: ExecOptions) => {
      if (!['auto', 'bwrap', 'none'].includes(o.isolation ?? 'auto')) throw new UserError(`--isolation must be auto, bwrap or none`);
      if (o.batch) {
        if (file !== undefined || o.tests) throw new UserError('--batch takes no PROGRAM and no --tests: each line names its own');
        return runBatch(o.batch, o);
      }
      if (file === undefined || !o.tests) throw new UserError('give PROGRAM and --tests TESTS.jsonl, or --batch RUNS.jsonl');
      const style = o.style === undefined ? undefined : TestStyle.safeParse(o.style);
      if (style && !style.success) throw new UserError(`--style must be stdio, call or assert, got "${o.style}"`);
      if (!['exact', 'tokens', 'float', 'checker'].includes(o.comparison ?? 'tokens')) {
        throw new UserError(`--comparison must be exact, tokens, float or checker, got "${o.comparison}"`);
      }
      if (!['auto', 'bwrap', 'none'].includes(o.isolation ?? 'auto')) throw new UserError(`--isolation must be auto, bwrap or none`);
      const source = read(file, 'program');
      const parsed = parseTestsFile(read(o.tests, 'tests'), o.tests, style?.data);
      if (parsed.style === 'call' && !o.fn) throw new UserError('call-style tests need --fn NAME');
      const checker = o.checker ? read(o.checker, 'checker') : undefined;
      if (o.comparison === 'checker' && !checker) throw new UserError('--comparison checker needs --checker FILE');
      const limits: Record<string, number> = {};
      const t = positive(o.timeLimit, '--time-limit');
      const m = positive(o.memoryLimit, '--memory-limit');
      if (t !== undefined) limits.timeSeconds = t;
      if (m !== undefined) limits.memoryMb = m;
      const sandbox = await createSandbox({ pythonPath: o.python, isolation: o.isolation as 'auto' | 'bwrap' | 'none' });
      try {
        const results = await sandbox.run({
          program: source,
          tests: parsed.tests,
          ...(o.fn ? { entryPoint: o.fn } : {}),
          limits,
          comparison: (o.comparison ?? 'tokens') as ComparisonMode,
          ...(checker ? { checker } : {}),
          stopOnFirstFailure: o.stopOnFailure ?? false,
        });
        for (const r of results) {
          if (o.json) process.stdout.write(JSON.stringify(resultLine(r)) + '\n');
          else {
            const why = r.exceptionType ? ` ${r.exceptionType}${r.message ? ': ' + r.message : ''}` : r.message ? ` ${r.message}` : '';
            process.stdout.write(`test ${r.test}: ${r.verdict} (${r.timeMs.toFixed(1)} ms, ${r.memoryKb} KiB)${why}\n`);
          }
        }
        const passed = results.filter((r) => r.verdict === 'accepted').length;
        if (!o.json) process.stdout.write(`${passed}/${parsed.tests.length} accepted${sandbox.isolation === 'bwrap' ? '' : ' (not isolated)'}\n`);
        if (results.some((r) => r.verdict === 'sandbox_error')) process.exitCode = 3;
        else if (passed < parsed.tests.length) process.exitCode = 1;
      } finally {
        await sandbox.close();
      }
    });
}
