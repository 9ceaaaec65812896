/**
 * Plain python batch execution for building and checking the demo data and the catalog policy.
 * It is not the product sandbox (src/sandbox): no isolation beyond rlimits in a forked child.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { canonicalJson } from '../../events/canonical-json.js';

const RUNNER = fileURLToPath(new URL('./runner.py', import.meta.url));

/** Debian's python3 by default; override with CRUCIBLE_PYTHON or the `python` option. */
export function defaultPython(): string {
  return process.env.CRUCIBLE_PYTHON ?? '/usr/bin/python3';
}

export type RunnerTest = { input: string } | { args: unknown[] };

export interface RunnerJob {
  program: string;
  style: 'stdio' | 'call';
  entryPoint?: string;
  tests: RunnerTest[];
  timeSeconds: number;
  memoryMb: number;
  /** After the first timeout the remaining tests are not run (status 'skipped'). */
  stopOnTimeout?: boolean;
}

const RunOutcome = z.object({
  status: z.enum(['ok', 'error', 'timeout', 'compile_error', 'crash', 'skipped']),
  output: z.string().optional(),
  error: z.string().optional(),
  message: z.string().optional(),
});
export type RunOutcome = z.infer<typeof RunOutcome>;
const RunnerReply = z.object({ results: z.array(z.array(RunOutcome)) });

export interface RunBatchOptions {
  python?: string;
  /** Parallel python processes; jobs are split between them in order. */
  workers?: number;
}

/** Runs every job's program on each of its tests; results[j][t] matches jobs[j].tests[t]. */
export async function runBatch(jobs: RunnerJob[], opts: RunBatchOptions = {}): Promise<RunOutcome[][]> {
  const workers = Math.max(1, Math.min(opts.workers ?? 1, jobs.length));
  if (workers === 1) return runOneProcess(jobs, opts.python ?? defaultPython());
  const size = Math.ceil(jobs.length / workers);
  const parts: RunnerJob[][] = [];
  for (let i = 0; i < jobs.length; i += size) parts.push(jobs.slice(i, i + size));
  const replies = await Promise.all(parts.map((p) => runOneProcess(p, opts.python ?? defaultPython())));
  return replies.flat();
}

/** Runs a python script that reads one JSON request on stdin and prints one JSON reply. */
export function runPythonJson<S extends z.ZodType>(python: string, script: string, request: unknown, reply: S, what: string): Promise<z.output<S>> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-I', script], { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new Error(`cannot start ${python}: ${e.message}`)));
    child.on('close', (code) => {
      if (code !== 0) {
        reject(new Error(`${what} (${python}) exited ${code}: ${Buffer.concat(err).toString().slice(-500)}`));
        return;
      }
      try {
        resolve(reply.parse(JSON.parse(Buffer.concat(out).toString())));
      } catch (e) {
        reject(new Error(`${what} gave an unreadable reply: ${(e as Error).message}`));
      }
    });
    child.stdin.end(JSON.stringify(request));
  });
}

async function runOneProcess(jobs: RunnerJob[], python: string): Promise<RunOutcome[][]> {
  if (jobs.length === 0) return [];
  const reply = await runPythonJson(python, RUNNER, { jobs }, RunnerReply, 'demo runner');
  if (reply.results.length !== jobs.length) throw new Error('demo runner gave an unreadable reply: result count mismatch');
  return reply.results;
}

/** Whitespace-token comparison for stdio outputs. */
export function sameTokens(a: string, b: string): boolean {
  const ta = a.split(/\s+/).filter(Boolean);
  const tb = b.split(/\s+/).filter(Boolean);
  return ta.length === tb.length && ta.every((t, i) => t === tb[i]);
}



/** Did a run produce the expected value? stdio: tokens; call: equal JSON values. */
export function outcomeMatches(style: 'stdio' | 'call', outcome: RunOutcome, expected: unknown): boolean {
  if (outcome.status !== 'ok' || outcome.output === undefined) return false;
  if (style === 'stdio') return typeof expected === 'string' && sameTokens(outcome.output, expected);
  try {
    return canonicalJson(JSON.parse(outcome.output)) === canonicalJson(expected);
  } catch {
    return false;
  }
}

/** The value a successful run produced, in the shape expected values are stored in. */
export function outcomeValue(style: 'stdio' | 'call', outcome: RunOutcome): unknown {
  if (outcome.status !== 'ok' || outcome.output === undefined) {
    throw new Error(`run did not succeed: ${outcome.status} ${outcome.error ?? ''} ${outcome.message ?? ''}`);
  }
  return style === 'stdio' ? outcome.output : JSON.parse(outcome.output);
}
