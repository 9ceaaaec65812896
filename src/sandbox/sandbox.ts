import { createHash } from 'node:crypto';
import type { TestCase } from '../core/problem.js';
import type { ComparisonMode, RunRequest, Sandbox, TestResult, Verdict } from './api.js';
import { compareAssertValue, compareCallValue } from './compare.js';
import type { TextComparer } from './text-compare.js';
import { resolveLimits, toWire, type SandboxLimits, type WireLimits } from './limits.js';
import { ServerPool } from './pool.js';
import { parseRunRequest } from './request.js';
import { fromJson, toJson, type Tagged } from './values.js';
import { SandboxFault, type ForkServer } from './worker.js';

const OUTPUT_CAP = 64 * 1024;
const ORACLE_LIMITS: WireLimits = { cpu_s: 2, wall_s: 5, mem_mb: 512, out_bytes: 16 << 20, nproc: 4 };

/** How one test is run and judged. Expected values stay in this object, in Node. */
type Expected =
  | { kind: 'none' }
  | { kind: 'text'; text: string }
  | { kind: 'json'; value: Tagged }
  | { kind: 'python'; value: Tagged };

interface Plan {
  mode: 'stdio' | 'call' | 'expr' | 'exec';
  payload: Record<string, unknown>;
  expected: Expected;
  /** For checkers: the test input as the checker sees it. */
  input?: string;
  assertMode?: 'outside' | 'inprocess';
}

/** What the fork-server reports for one child (see classify() in forkserver.py). */
interface WireResult {
  verdict: Verdict | 'ran' | 'assert_failed';
  cpu_ms: number;
  wall_ms: number;
  memory_kb: number;
  output?: string | null;
  value?: Tagged;
  exception_type?: string;
  message?: string;
}

type AssertPlan = { call: string; expected: Tagged } | null;

export interface SandboxCoreOptions {
  pool: ServerPool;
  oracle: ServerPool;
  isolation: 'bwrap' | 'rlimits';
  defaultLimits: SandboxLimits;
  text: TextComparer;
}

/** The sandbox: plans tests, drives fork-servers, and judges results against expected values. */
export class ForkServerSandbox implements Sandbox {
  readonly isolation: 'bwrap' | 'rlimits';
  readonly #o: SandboxCoreOptions;
  /** Split and evaluated asserts, by source: the same tests run against many programs. */
  readonly #assertCache = new Map<string, AssertPlan>();

  constructor(o: SandboxCoreOptions) {
    this.#o = o;
    this.isolation = o.isolation;
  }

  async run(input: RunRequest): Promise<TestResult[]> {
    const req = parseRunRequest(input);
    if (req.tests.length === 0) return [];
    const limits = resolveLimits(this.#o.defaultLimits, req.limits);
    const wire = toWire(limits);
    const style = req.tests[0]!.style;
    const plans = style === 'assert' ? await this.#planAsserts(req.tests) : req.tests.map(planOf);
    const comparison: ComparisonMode = req.comparison ?? 'tokens';
    const job: Job = {
      key: createHash('sha256').update(`${req.entryPoint ?? ''}\0${req.prelude ?? style === 'call'}\0${req.program}`).digest('hex'),
      program: req.program,
      entry: req.entryPoint ?? null,
      prelude: req.prelude ?? style === 'call',
      wire,
      comparison,
      checker: req.checker,
    };
    const indices = plans.map((_, i) => i);
    if (req.stopOnFirstFailure || this.#o.pool.size === 1 || plans.length < 2) {
      return this.#runChunk(job, plans, indices, req.stopOnFirstFailure ?? false);
    }
    // Spread one program's tests over the servers; each chunk loads the program once.
    const n = Math.min(this.#o.pool.size, plans.length);
    const chunks = Array.from({ length: n }, (_, c) => indices.filter((i) => i % n === c));
    const parts = await Promise.all(chunks.map((c) => this.#runChunk(job, plans, c, false)));
    return parts.flat().sort((a, b) => a.test - b.test);
  }

  /** Runs some tests of one program: all of them in one `run` request to one server (one test
   * per request with `stop`, so nothing runs past the first failure). A server that fails on
   * the way costs the test it was running a sandbox_error; the rest go on on another server. */
  async #runChunk(job: Job, plans: Plan[], indices: number[], stop: boolean): Promise<TestResult[]> {
    const out: TestResult[] = [];
    let todo = indices;
    while (todo.length > 0) {
      const server = await this.#o.pool.acquire();
      try {
        while (todo.length > 0 && server.alive) {
          const batch = stop ? todo.slice(0, 1) : todo;
          const { results, compileError } = await this.#runBatch(server, job, plans, batch);
          out.push(...results);
          todo = todo.slice(results.length);
          if (compileError) {
            // One compile error answers every test of this program (the first only, with stop).
            for (const j of stop ? todo.slice(0, 1) : todo) out.push(this.#make(j, 'compile_error', plans[j]!, compileError));
            return out;
          }
          if (stop && results.some((r) => r.verdict !== 'accepted')) return out;
        }
      } finally {
        this.#o.pool.release(server);
      }
    }
    return out;
  }

  /** One `run` request; results in `batch` order, judged as they arrive. Fewer results than
   * tests only after a fault, and then the first missing test is the one that got it. */
  async #runBatch(
    server: ForkServer,
    job: Job,
    plans: Plan[],
    batch: number[],
  ): Promise<{ results: TestResult[]; compileError?: Partial<TestResult> }> {
    const judged: Array<Promise<TestResult>> = [];
    const onPart = (part: Record<string, unknown>): void => {
      const k = part.k as number;
      if (k !== judged.length || k >= batch.length) return; // out of order: answered as a fault below
      const i = batch[k]!;
      judged.push(
        typeof part.error === 'string'
          ? Promise.resolve(this.#make(i, 'sandbox_error', plans[i]!, { message: `fork-server: ${part.error}` }))
          : this.#judge(i, plans[i]!, part.result as WireResult, job),
      );
    };
    const msg: Record<string, unknown> = {
      op: 'run',
      key: job.key,
      entry: job.entry,
      prelude: job.prelude,
      // Per test: assert tests of one request may be split (expr) or run in-process (exec).
      items: batch.map((i) => ({ mode: plans[i]!.mode, payload: plans[i]!.payload, want_output: plans[i]!.expected.kind === 'none' })),
      limits: job.wire,
    };
    if (server.loadedKey !== job.key) msg.program = job.program;
    server.loadedKey = job.key; // the server holds it (compiled, or its compile error) once it reads this
    let fault: string | undefined;
    try {
      const reply = await server.call(msg, (job.wire.wall_s + 15) * 1000, onPart);
      if (reply.ok === false) {
        const ce = reply.compile_error as { type: string; message: string };
        return { results: await Promise.all(judged), compileError: { exceptionType: ce.type, message: ce.message } };
      }
      if (judged.length < batch.length) fault = `fork-server answered ${judged.length} of ${batch.length} tests`;
    } catch (err) {
      if (!(err instanceof SandboxFault)) throw err;
      server.loadedKey = undefined;
      fault = err.message;
    }
    const results = await Promise.all(judged);
    if (fault !== undefined) {
      const i = batch[results.length]!;
      results.push(this.#make(i, 'sandbox_error', plans[i]!, { message: fault }));
    }
    return { results };
  }

  #make(i: number, verdict: Verdict, plan: Plan, extra: Partial<TestResult> = {}): TestResult {
    const r: TestResult = { test: i, verdict, timeMs: 0, memoryKb: 0, isolated: this.isolation === 'bwrap', ...extra };
    if (plan.assertMode) r.assertMode = plan.assertMode;
    return r;
  }

  async #judge(i: number, plan: Plan, w: WireResult, job: Job): Promise<TestResult> {
    const base: Partial<TestResult> = { timeMs: w.cpu_ms, wallMs: w.wall_ms, memoryKb: w.memory_kb };
    const output =
      w.value !== undefined ? capped(JSON.stringify(toJson(w.value))) : typeof w.output === 'string' ? capped(w.output) : undefined;
    if (output !== undefined) base.output = output;
    if (w.message) base.message = w.message;
    if (w.exception_type) base.exceptionType = w.exception_type;
    if (w.verdict === 'assert_failed') return this.#make(i, 'wrong_answer', plan, base);
    if (w.verdict !== 'ran') return this.#make(i, w.verdict, plan, base);
    const e = plan.expected;
    if (e.kind === 'none') return this.#make(i, 'accepted', plan, base);
    let ok: boolean;
    if (job.comparison === 'checker') {
      const verdict = await this.#check(plan, output ?? '', e, job.checker ?? '');
      if (verdict.fault) return this.#make(i, 'sandbox_error', plan, { ...base, message: verdict.fault });
      ok = verdict.ok;
    } else if (e.kind === 'text') {
      ok = await this.#o.text.compare(typeof w.output === 'string' ? w.output : '', e.text, job.comparison);
    } else if (w.value === undefined) {
      ok = false;
    } else if (e.kind === 'json') {
      ok = compareCallValue(w.value, e.value, job.comparison);
    } else {
      ok = compareAssertValue(w.value, e.value);
    }
    return this.#make(i, ok ? 'accepted' : 'wrong_answer', plan, base);
  }

  /** A checker decides between several valid answers; it runs sandboxed in the oracle server. */
  async #check(plan: Plan, output: string, e: Expected, checker: string): Promise<{ ok: boolean; fault?: string }> {
    const expected = e.kind === 'text' ? e.text : e.kind === 'none' ? null : toJson(e.value);
    const server = await this.#o.oracle.acquire();
    try {
      const reply = await server.call({ op: 'check', checker, input: plan.input ?? null, output, expected, limits: ORACLE_LIMITS }, 30_000);
      const r = reply.result as WireResult;
      if (r.verdict !== 'ran' || typeof r.value !== 'boolean') {
        return { ok: false, fault: `checker failed: ${r.exception_type ?? r.verdict} ${r.message ?? ''}`.trim() };
      }
      return { ok: r.value };
    } catch (err) {
      if (err instanceof SandboxFault) return { ok: false, fault: err.message };
      throw err;
    } finally {
      this.#o.oracle.release(server);
    }
  }

  /** `assert CALL == EXPECTED` is split in the oracle server; EXPECTED is evaluated there (no
   * candidate code), so the candidate's child only computes CALL. Other shapes run in-process. */
  async #planAsserts(tests: readonly TestCase[]): Promise<Plan[]> {
    const codes = tests.map((t) => (t.style === 'assert' ? t.code : ''));
    const todo = [...new Set(codes.filter((c) => !this.#assertCache.has(c)))];
    if (todo.length > 0) {
      const server = await this.#o.oracle.acquire();
      try {
        const split = (await server.call({ op: 'split', codes: todo }, 30_000)).results as Array<{ call: string; expected: string } | null>;
        const withSplit = todo.map((c, k) => ({ c, s: split[k] ?? null })).filter((x) => x.s !== null);
        const evals = withSplit.length
          ? ((await server.call({ op: 'eval', exprs: withSplit.map((x) => x.s!.expected), limits: ORACLE_LIMITS }, 120_000))
              .results as WireResult[])
          : [];
        for (const c of todo) this.#assertCache.set(c, null);
        withSplit.forEach((x, k) => {
          const r = evals[k];
          if (r && r.verdict === 'ran' && r.value !== undefined) this.#assertCache.set(x.c, { call: x.s!.call, expected: r.value });
        });
        if (this.#assertCache.size > 50_000) this.#assertCache.clear();
      } catch (err) {
        // Without the oracle the asserts can still run in-process; never guess a verdict.
        if (!(err instanceof SandboxFault)) throw err;
      } finally {
        this.#o.oracle.release(server);
      }
    }
    return codes.map((code) => {
      const p = this.#assertCache.get(code);
      if (p) return { mode: 'expr', payload: { expr: p.call }, expected: { kind: 'python', value: p.expected }, assertMode: 'outside' };
      return { mode: 'exec', payload: { code }, expected: { kind: 'none' }, assertMode: 'inprocess' };
    });
  }

  async close(): Promise<void> {
    await Promise.all([this.#o.pool.close(), this.#o.oracle.close(), this.#o.text.close()]);
  }
}

interface Job {
  /** Identity of the loaded program (source, entry point, prelude). */
  key: string;
  program: string;
  entry: string | null;
  prelude: boolean;
  wire: WireLimits;
  comparison: ComparisonMode;
  checker: string | undefined;
}

function planOf(t: TestCase): Plan {
  if (t.style === 'stdio') {
    return {
      mode: 'stdio',
      payload: { input: t.input },
      input: t.input,
      expected: t.output === null ? { kind: 'none' } : { kind: 'text', text: t.output },
    };
  }
  if (t.style === 'call') {
    return {
      mode: 'call',
      payload: { args: JSON.stringify(t.args) },
      input: JSON.stringify(t.args),
      expected: t.expected === undefined ? { kind: 'none' } : { kind: 'json', value: fromJson(t.expected) },
    };
  }
  throw new Error('assert tests are planned by #planAsserts');
}

const capped = (s: string): string => (s.length > OUTPUT_CAP ? s.slice(0, OUTPUT_CAP) : s);
