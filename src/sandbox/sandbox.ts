import { z } from 'zod';
import type { TestCase } from '../core/problem.js';
import type { ComparisonMode, RunRequest, Sandbox, TestResult, Verdict } from './api.js';
import { VERDICTS } from './api.js';
import { compareCallValue } from './compare.js';
import type { TextComparer } from './text-compare.js';
import { resolveLimits, toWire, type WireLimits, type SandboxLimits } from './limits.js';
import { ServerPool } from './pool.js';
import { parseRunRequest } from './request.js';
import { fromJson, isTagged, toJson, type Tagged } from './values.js';
import { SandboxFault, type ForkServer } from './worker.js';

const OUTPUT_CAP = 64 * 1024;
const CHECKER_LIMITS: WireLimits = { cpu_s: 2, wall_s: 5, mem_mb: 512, out_bytes: 16 << 20, nproc: 4 };

/** How one stdio or call test is run and judged. Expected values stay in this object, in Node. */
type Expected = { kind: 'none' } | { kind: 'text'; text: string } | { kind: 'json'; value: Tagged };

interface Plan {
  mode: 'stdio' | 'call' | 'assert';
  payload: Record<string, unknown>;
  expected: Expected;
  /** For checkers: the test input as the checker sees it. */
  input?: string;
}

/** What a fork-server reports for one child (see classify() in forkserver.py). The harness that
 * writes it is trusted, but values inside are the program's claims and are checked apart. */
const WireResult = z.object({
  verdict: z.enum([...VERDICTS, 'ran', 'assert_failed']),
  cpu_ms: z.number(),
  wall_ms: z.number(),
  memory_kb: z.number(),
  memory_peak_kb: z.number().optional(),
  phase: z.enum(['load', 'test']).optional(),
  out_b64: z.string().optional(),
  value: z.unknown().optional(),
  args: z.array(z.unknown()).optional(),
  exception_type: z.string().optional(),
  message: z.string().optional(),
  by: z.literal('candidate').optional(),
});
type WireResult = z.infer<typeof WireResult>;

export interface SandboxCoreOptions {
  pool: ServerPool;
  /** Trusted programs (references): fork-servers no candidate ever used. */
  reference: ServerPool;
  isolation: 'bwrap' | 'rlimits';
  cgroup: boolean;
  defaultLimits: SandboxLimits;
  text: TextComparer;
}

const decode = (b64: string | undefined): string | undefined => (b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8'));
const malformed = (why: string): Partial<TestResult> => ({ exceptionType: 'MalformedResult', message: why, phase: 'test' });

/** The sandbox: plans tests, drives fork-servers, and judges results against expected values. */
export class ForkServerSandbox implements Sandbox {
  readonly isolation: 'bwrap' | 'rlimits';
  readonly cgroup: boolean;
  readonly #o: SandboxCoreOptions;
  /** What a checker says of the reference's own output, by checker, input and output: whether
   * a checker that fails on a candidate's output can judge at all. */
  readonly #checkerSane = new Map<string, Promise<{ ok: boolean; fault?: string }>>();

  constructor(o: SandboxCoreOptions) {
    this.#o = o;
    this.isolation = o.isolation;
    this.cgroup = o.cgroup;
  }

  async run(input: RunRequest): Promise<TestResult[]> {
    const req = parseRunRequest(input);
    if (req.tests.length === 0) return [];
    try {
      return await this.#run(req);
    } catch (err) {
      // Whatever went wrong is this request's (the sandbox's), never another program's: every
      // test of it is a sandbox_error, and the caller's batch goes on.
      const message = `sandbox failed: ${(err as Error)?.message ?? String(err)}`.slice(0, 500);
      return req.tests.map((_, i) => this.#make(i, 'sandbox_error', { message }));
    }
  }

  async #run(req: ReturnType<typeof parseRunRequest>): Promise<TestResult[]> {
    const limits = resolveLimits(this.#o.defaultLimits, req.limits);
    const style = req.tests[0]!.style;
    const job: Job = {
      program: req.program,
      entry: req.entryPoint ?? null,
      prelude: req.prelude ?? style === 'call',
      wire: toWire(limits),
      comparison: req.comparison ?? 'tokens',
      checker: req.checker,
      pool: req.role === 'reference' ? this.#o.reference : this.#o.pool,
    };
    const plans = req.tests.map(planOf);
    const indices = plans.map((_, i) => i);
    if (req.stopOnFirstFailure || job.pool.size === 1 || plans.length < 2) {
      return this.#runChunk(job, plans, indices, req.stopOnFirstFailure ?? false);
    }
    // Spread one program's tests over the servers; each chunk loads the program once.
    const n = Math.min(job.pool.size, plans.length);
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
      const batch = stop ? todo.slice(0, 1) : todo;
      const { results, compileError } = await this.#request(
        job,
        batch.map((i) => plans[i]!),
        (k, w) => this.#judge(batch[k]!, plans[batch[k]!]!, w, job),
      );
      const judged = results.map((r, k) => ('fault' in r ? this.#make(batch[k]!, 'sandbox_error', { message: r.fault }) : r.result));
      out.push(...judged);
      todo = todo.slice(judged.length);
      if (compileError) {
        // One compile error answers every test of this program (the first only, with stop).
        const mode = plans[0]?.mode === 'assert' ? { assertMode: 'outside' as const } : {};
        for (const j of stop ? todo.slice(0, 1) : todo) out.push(this.#make(j, 'compile_error', { ...compileError, phase: 'load', ...mode }));
        return out;
      }
      if (stop && judged.some((r) => r.verdict !== 'accepted')) return out;
    }
    return out;
  }

  /** One `run` request on a server of the job's pool: results in item order, each handed to
   * `onResult` as it arrives (its promise is caught at once: a failing judgement is this
   * test's sandbox_error, never an unhandled rejection). Fewer results than items only after
   * a fault; the first missing item then carries it. */
  async #request<T>(
    job: Job,
    items: Plan[],
    onResult: (k: number, w: WireResult) => Promise<T>,
  ): Promise<{ results: Array<{ result: T } | { fault: string }>; compileError?: Partial<TestResult> }> {
    const server = await job.pool.acquire();
    const judged: Array<Promise<{ result: T } | { fault: string }>> = [];
    const settle = (p: Promise<T>): Promise<{ result: T } | { fault: string }> =>
      p.then(
        (result) => ({ result }),
        (err: unknown) => ({ fault: `judging failed: ${(err as Error).message ?? String(err)}` }),
      );
    const onPart = (part: Record<string, unknown>): void => {
      const k = part.k as number;
      if (k !== judged.length || k >= items.length) return; // out of order: answered as a fault below
      if (typeof part.error === 'string') {
        judged.push(Promise.resolve({ fault: `fork-server: ${part.error}` }));
        return;
      }
      const w = WireResult.safeParse(part.result);
      judged.push(w.success ? settle(onResult(k, w.data)) : Promise.resolve({ fault: `fork-server sent a malformed result: ${w.error.issues[0]?.message}` }));
    };
    const asserts = items.length > 0 && items[0]!.mode === 'assert';
    const msg: Record<string, unknown> = {
      op: asserts ? 'assert' : 'run',
      program: job.program,
      entry: job.entry,
      prelude: job.prelude,
      items: items.map((p) => (p.mode === 'assert' ? { code: p.payload.code } : { mode: p.mode, payload: p.payload, want_output: p.expected.kind === 'none' })),
      limits: job.wire,
    };
    let fault: string | undefined;
    try {
      // Between two replies a server runs one test: the candidate's wall limit, and for an
      // assert test the oracle's beside it.
      const reply = await server.call(msg, (job.wire.wall_s * (asserts ? 2 : 1) + 15) * 1000, onPart);
      if (reply.ok === false) {
        const ce = reply.compile_error as { type: string; message: string };
        return { results: await Promise.all(judged), compileError: { exceptionType: ce.type, message: ce.message } };
      }
      if (judged.length < items.length) fault = `fork-server answered ${judged.length} of ${items.length} tests`;
    } catch (err) {
      if (!(err instanceof SandboxFault)) throw err;
      fault = err.message;
    } finally {
      job.pool.release(server);
    }
    const results = await Promise.all(judged);
    if (fault !== undefined) results.push({ fault });
    return { results };
  }

  #make(i: number, verdict: Verdict, extra: Partial<TestResult> = {}): TestResult {
    const r: TestResult = { test: i, verdict, timeMs: 0, memoryKb: 0, isolated: this.isolation === 'bwrap', cgroup: this.cgroup, ...extra };
    if (verdict === 'accepted') delete r.phase;
    return r;
  }

  #base(w: WireResult): Partial<TestResult> {
    const base: Partial<TestResult> = { timeMs: w.cpu_ms, wallMs: w.wall_ms, memoryKb: w.memory_kb };
    if (w.memory_peak_kb !== undefined) base.memoryPeakKb = w.memory_peak_kb;
    if (w.phase) base.phase = w.phase;
    if (w.message) base.message = w.message;
    if (w.exception_type) base.exceptionType = w.exception_type;
    return base;
  }

  async #judge(i: number, plan: Plan, w: WireResult, job: Job): Promise<TestResult> {
    if (plan.mode === 'assert') return this.#assertVerdict(i, w);
    const base = this.#base(w);
    const text = decode(w.out_b64);
    if (w.value !== undefined && !isTagged(w.value)) return this.#make(i, 'runtime_error', { ...base, ...malformed('the result is not a valid value') });
    const value = w.value as Tagged | undefined;
    const full = value !== undefined ? JSON.stringify(toJson(value)) : text;
    if (full !== undefined) base.output = capped(full);
    if (w.verdict === 'assert_failed') {
      return this.#make(i, 'sandbox_error', { ...base, message: `unexpected ${w.verdict} from a candidate run` });
    }
    if (w.verdict !== 'ran') return this.#make(i, w.verdict, base);
    const e = plan.expected;
    if (e.kind === 'none') return this.#make(i, 'accepted', base);
    let ok: boolean;
    if (job.comparison === 'checker') {
      const verdict = await this.#checkCandidate(plan, full ?? '', e, job.checker ?? '');
      if (verdict.fault) return this.#make(i, 'sandbox_error', { ...base, message: verdict.fault });
      ok = verdict.ok;
    } else if (e.kind === 'text') {
      ok = await this.#o.text.compare(text ?? '', e.text, job.comparison);
    } else if (value === undefined) {
      ok = false;
    } else {
      ok = compareCallValue(value, e.value, job.comparison);
    }
    return this.#make(i, ok ? 'accepted' : 'wrong_answer', ok ? base : { ...base, phase: 'test' });
  }

  /** A checker on a candidate's whole output (up to the output limit). A checker that fails
   * (raises, crashes, runs out of time) on it judges the candidate wrong when it accepts the
   * reference's own output on the same test; only a checker that cannot judge the reference
   * either is a sandbox_error, reported as the checker's. */
  async #checkCandidate(plan: Plan, output: string, e: Expected, checker: string): Promise<{ ok: boolean; fault?: string }> {
    const r = await this.#check(plan, output, e, checker);
    if (r.fault === undefined) return r;
    if (e.kind !== 'text') return { ok: false, fault: `checker failed and there is no reference output to try it on: ${r.fault}` };
    const key = `${checker}\0${plan.input ?? ''}\0${e.text}`;
    let sane = this.#checkerSane.get(key);
    if (!sane) {
      sane = this.#check(plan, e.text, e, checker);
      this.#checkerSane.set(key, sane);
      if (this.#checkerSane.size > 10_000) this.#checkerSane.delete(this.#checkerSane.keys().next().value!);
    }
    const ref = await sane;
    if (ref.fault === undefined && ref.ok) return { ok: false };
    return { ok: false, fault: `the checker cannot judge the reference's own output either (${ref.fault ?? 'it rejects it'}); on this output: ${r.fault}` };
  }

  /** A checker decides between several valid answers; it runs sandboxed in a child of its own. */
  async #check(plan: Plan, output: string, e: Expected, checker: string): Promise<{ ok: boolean; fault?: string }> {
    const expected = e.kind === 'text' ? e.text : e.kind === 'none' ? null : toJson(e.value);
    const server = await this.#o.pool.acquire();
    try {
      const reply = await server.call({ op: 'check', checker, input: plan.input ?? null, output, expected, limits: CHECKER_LIMITS }, 30_000);
      const r = WireResult.safeParse(reply.result);
      if (!r.success || r.data.verdict !== 'ran' || typeof r.data.value !== 'boolean') {
        const d = r.success ? r.data : undefined;
        return { ok: false, fault: `checker failed: ${d?.exception_type ?? d?.verdict ?? 'malformed reply'} ${d?.message ?? ''}`.trim() };
      }
      return { ok: r.data.value };
    } catch (err) {
      if (err instanceof SandboxFault) return { ok: false, fault: err.message };
      throw err;
    } finally {
      this.#o.pool.release(server);
    }
  }

  /** An assert test's verdict: the oracle ran its body against the candidate's process. */
  #assertVerdict(i: number, w: WireResult): TestResult {
    const base: Partial<TestResult> = { ...this.#base(w), assertMode: 'outside' };
    if (w.verdict === 'ran') return this.#make(i, 'accepted', base);
    if (w.verdict === 'assert_failed') return this.#make(i, 'wrong_answer', { ...base, phase: 'test', message: w.message ?? 'assertion failed' });
    return this.#make(i, w.verdict, { phase: 'test', ...base });
  }

  async close(): Promise<void> {
    await Promise.all([this.#o.pool.close(), this.#o.reference.close(), this.#o.text.close()]);
  }
}

interface Job {
  program: string;
  entry: string | null;
  prelude: boolean;
  wire: WireLimits;
  comparison: ComparisonMode;
  checker: string | undefined;
  pool: ServerPool;
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
    const args = t.args.map(fromJson);
    return {
      mode: 'call',
      payload: { args },
      input: JSON.stringify(args.map(toJson)),
      expected: t.expected === undefined ? { kind: 'none' } : { kind: 'json', value: fromJson(t.expected) },
    };
  }
  return { mode: 'assert', payload: { code: t.code }, expected: { kind: 'none' } };
}

const capped = (s: string): string => (s.length > OUTPUT_CAP ? s.slice(0, OUTPUT_CAP) : s);
