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
const ORACLE_LIMITS: WireLimits = { cpu_s: 2, wall_s: 5, mem_mb: 512, out_bytes: 16 << 20, nproc: 4 };
/** Passes of an assert body in the oracle (each learns one call the candidate must answer). */
export const MAX_ASSERT_ROUNDS = 1000;

/** How one stdio or call test is run and judged. Expected values stay in this object, in Node. */
type Expected = { kind: 'none' } | { kind: 'text'; text: string } | { kind: 'json'; value: Tagged };

interface Plan {
  mode: 'stdio' | 'call';
  payload: Record<string, unknown>;
  expected: Expected;
  /** For checkers: the test input as the checker sees it. */
  input?: string;
}

/** What a fork-server reports for one child (see classify() in forkserver.py). The harness that
 * writes it is trusted, but values inside are the program's claims and are checked apart. */
const WireResult = z.object({
  verdict: z.enum([...VERDICTS, 'ran', 'assert_failed', 'need', 'fatal']),
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
  call: z.object({ name: z.string(), args: z.array(z.unknown()), key: z.string() }).optional(),
  key: z.string().optional(),
});
type WireResult = z.infer<typeof WireResult>;

/** What a candidate's process answered for one proxied call of an assert test. */
type CallOutcome =
  | { kind: 'value'; value: Tagged; args?: Tagged[]; w: WireResult }
  | { kind: 'exc'; type: string; message: string; w: WireResult }
  | { kind: 'fatal'; result: Partial<TestResult> & { verdict: Verdict }; w?: WireResult };

interface PlannedCall {
  name: string;
  args: Tagged[];
  key: string;
}
type AssertPlan = { calls: PlannedCall[] } | { error: { type: string; message: string } };

export interface SandboxCoreOptions {
  pool: ServerPool;
  /** Trusted programs (references): fork-servers no candidate ever used. */
  reference: ServerPool;
  oracle: ServerPool;
  isolation: 'bwrap' | 'rlimits';
  cgroup: boolean;
  defaultLimits: SandboxLimits;
  text: TextComparer;
}

/** Functions a program defines at its top level (`def`, or a name bound to a lambda): the
 * names of an assert test that are proxies for the candidate. A line scan, not a parse: a
 * spurious name only makes a proxy that is never called. */
export function programNames(program: string): string[] {
  const out = new Set<string>();
  for (const m of program.matchAll(/^(?:async\s+)?def\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*=\s*lambda\b/gm)) out.add((m[1] ?? m[2])!);
  return [...out];
}

const decode = (b64: string | undefined): string | undefined => (b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8'));
const malformed = (why: string): Partial<TestResult> => ({ exceptionType: 'MalformedResult', message: why, phase: 'test' });

/** The sandbox: plans tests, drives fork-servers, and judges results against expected values. */
export class ForkServerSandbox implements Sandbox {
  readonly isolation: 'bwrap' | 'rlimits';
  readonly cgroup: boolean;
  readonly #o: SandboxCoreOptions;
  /** Prefetchable calls of assert tests, by entry point and source. */
  readonly #planCache = new Map<string, AssertPlan>();

  constructor(o: SandboxCoreOptions) {
    this.#o = o;
    this.isolation = o.isolation;
    this.cgroup = o.cgroup;
  }

  async run(input: RunRequest): Promise<TestResult[]> {
    const req = parseRunRequest(input);
    if (req.tests.length === 0) return [];
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
    if (style === 'assert') return this.#runAsserts(job, req.tests, req.stopOnFirstFailure ?? false);
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
      const { results, compileError } = await this.#request(job, batch.map((i) => plans[i]!), (k, w) =>
        this.#judge(batch[k]!, plans[batch[k]!]!, w, job),
      );
      const judged = results.map((r, k) =>
        'fault' in r ? this.#make(batch[k]!, 'sandbox_error', { message: r.fault }) : r.result,
      );
      out.push(...judged);
      todo = todo.slice(judged.length);
      if (compileError) {
        // One compile error answers every test of this program (the first only, with stop).
        for (const j of stop ? todo.slice(0, 1) : todo) out.push(this.#make(j, 'compile_error', { ...compileError, phase: 'load' }));
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
    const msg: Record<string, unknown> = {
      op: 'run',
      program: job.program,
      entry: job.entry,
      prelude: job.prelude,
      items: items.map((p) => ({ mode: p.mode, payload: p.payload, want_output: p.expected.kind === 'none' })),
      limits: job.wire,
    };
    let fault: string | undefined;
    try {
      const reply = await server.call(msg, (job.wire.wall_s + 15) * 1000, onPart);
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
    const base = this.#base(w);
    const text = decode(w.out_b64);
    if (w.value !== undefined && !isTagged(w.value)) return this.#make(i, 'runtime_error', { ...base, ...malformed('the result is not a valid value') });
    const value = w.value as Tagged | undefined;
    const output = value !== undefined ? capped(JSON.stringify(toJson(value))) : text !== undefined ? capped(text) : undefined;
    if (output !== undefined) base.output = output;
    if (w.verdict === 'assert_failed' || w.verdict === 'need' || w.verdict === 'fatal') {
      return this.#make(i, 'sandbox_error', { ...base, message: `unexpected ${w.verdict} from a candidate run` });
    }
    if (w.verdict !== 'ran') return this.#make(i, w.verdict, base);
    const e = plan.expected;
    if (e.kind === 'none') return this.#make(i, 'accepted', base);
    let ok: boolean;
    if (job.comparison === 'checker') {
      const verdict = await this.#check(plan, output ?? '', e, job.checker ?? '');
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

  /** A checker decides between several valid answers; it runs sandboxed in the oracle server. */
  async #check(plan: Plan, output: string, e: Expected, checker: string): Promise<{ ok: boolean; fault?: string }> {
    const expected = e.kind === 'text' ? e.text : e.kind === 'none' ? null : toJson(e.value);
    const server = await this.#o.oracle.acquire();
    try {
      const reply = await server.call({ op: 'check', checker, input: plan.input ?? null, output, expected, limits: ORACLE_LIMITS }, 30_000);
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
      this.#o.oracle.release(server);
    }
  }

  // ------------------------------------------------------------------ assert tests

  /** Assert tests are judged outside the candidate: each body runs in the oracle, where every
   * name of the program it calls is a proxy answered from the candidate's serialized results.
   * Calls with literal arguments are asked first, in one request; a body that needs another
   * call stops, the call is made, and the body runs again (up to MAX_ASSERT_ROUNDS passes). */
  async #runAsserts(job: Job, tests: readonly TestCase[], stop: boolean): Promise<TestResult[]> {
    const codes = tests.map((t) => (t.style === 'assert' ? t.code : ''));
    const names = [...new Set([...programNames(job.program), ...(job.entry ? [job.entry] : [])])];
    const nameSet = new Set(names);
    const plans = await this.#planAsserts(codes, job.entry, names, job.wire);
    const outcomes = new Map<string, CallOutcome>();
    const results: Array<TestResult | undefined> = tests.map(() => undefined);
    const used: Array<Set<string>> = tests.map(() => new Set());
    for (const [i, p] of plans.entries()) {
      if (p && 'error' in p) results[i] = this.#make(i, 'runtime_error', { exceptionType: p.error.type, message: `the test does not compile: ${p.error.message}`, phase: 'test', assertMode: 'outside' });
    }
    let calls = dedupe(plans.flatMap((p) => (p && 'calls' in p ? p.calls.filter((c) => nameSet.has(c.name)) : [])));
    for (let round = 0; ; round++) {
      if (calls.length > 0) {
        const ce = await this.#candidateCalls(job, calls, outcomes);
        if (ce) {
          return tests.map((_, i) => results[i] ?? this.#make(i, 'compile_error', { ...ce, phase: 'load', assertMode: 'outside' }));
        }
      }
      const pending = results.flatMap((r, i) => (r === undefined ? [i] : []));
      if (pending.length === 0) break;
      if (round >= MAX_ASSERT_ROUNDS) {
        for (const i of pending) results[i] = this.#make(i, 'sandbox_error', { message: `the test needs more than ${MAX_ASSERT_ROUNDS} candidate calls in sequence`, assertMode: 'outside' });
        break;
      }
      const memo = [...outcomes].map(([key, o]) => [key, o.kind === 'value' ? { kind: 'value', value: o.value, ...(o.args ? { args: o.args } : {}) } : o.kind === 'exc' ? { kind: 'exc', type: o.type, message: o.message } : { kind: 'fatal' }]);
      const judged = await this.#oracleJudge(pending.map((i) => ({ code: codes[i]!, entry: job.entry, names })), memo, job.wire);
      const needed: PlannedCall[] = [];
      pending.forEach((i, k) => {
        const r = judged[k]!;
        if ('fault' in r) {
          results[i] = this.#make(i, 'sandbox_error', { message: r.fault, assertMode: 'outside' });
          return;
        }
        const w = r.w;
        if (w.verdict === 'need' && w.call && isTagged(w.call.args)) {
          used[i]!.add(w.call.key);
          if (!outcomes.has(w.call.key)) needed.push(w.call as PlannedCall);
          return;
        }
        results[i] = this.#assertVerdict(i, w, outcomes, used[i]!);
      });
      calls = dedupe(needed);
      if (calls.length === 0 && results.every((r) => r !== undefined)) break;
    }
    const out = results.map((r, i) => r ?? this.#make(i, 'sandbox_error', { message: 'assert test was not judged', assertMode: 'outside' }));
    if (!stop) return out;
    const first = out.findIndex((r) => r.verdict !== 'accepted');
    return first < 0 ? out : out.slice(0, first + 1);
  }

  /** The final verdict of an assert test from the oracle's last pass. */
  #assertVerdict(i: number, w: WireResult, outcomes: Map<string, CallOutcome>, used: Set<string>): TestResult {
    let time = 0;
    let mem = 0;
    for (const k of used) {
      const o = outcomes.get(k);
      const cw = o?.w;
      if (cw) {
        time += cw.cpu_ms;
        mem = Math.max(mem, cw.memory_kb);
      }
    }
    const base: Partial<TestResult> = { timeMs: Math.round(time * 1000) / 1000, memoryKb: mem, assertMode: 'outside' };
    if (w.verdict === 'fatal') {
      const o = w.key ? outcomes.get(w.key) : undefined;
      if (o?.kind === 'fatal') return this.#make(i, o.result.verdict, { ...base, ...o.result, assertMode: 'outside' });
      return this.#make(i, 'sandbox_error', { ...base, message: 'oracle reported an unknown fatal call' });
    }
    if (w.verdict === 'ran') return this.#make(i, 'accepted', base);
    if (w.verdict === 'assert_failed') return this.#make(i, 'wrong_answer', { ...base, phase: 'test', message: w.message ?? 'assertion failed' });
    if (w.verdict === 'runtime_error') {
      return this.#make(i, 'runtime_error', { ...base, phase: 'test', exceptionType: w.exception_type ?? 'Exception', ...(w.message ? { message: w.message } : {}) });
    }
    if (w.verdict === 'need') return this.#make(i, 'sandbox_error', { ...base, message: 'oracle asked for a malformed call' });
    // The body itself ran out of time or memory in the oracle (its loops count too).
    return this.#make(i, w.verdict, { ...base, phase: 'test', ...(w.message ? { message: w.message } : {}) });
  }

  /** Calls of the candidate's functions, run in its own process (one request per server
   * chunk). Fills `outcomes`; returns the compile error when the program does not compile. */
  async #candidateCalls(job: Job, calls: PlannedCall[], outcomes: Map<string, CallOutcome>): Promise<Partial<TestResult> | undefined> {
    // Up to eight calls go in one request (a request costs a request server); more are spread over the
    // servers, as the tests of stdio and call programs are.
    const n = Math.max(1, Math.min(job.pool.size, Math.ceil(calls.length / 8)));
    const chunks = Array.from({ length: n }, (_, c) => calls.filter((_, i) => i % n === c));
    const errs = await Promise.all(
      chunks.map(async (chunk) => {
        let todo = chunk;
        while (todo.length > 0) {
          const items: Plan[] = todo.map((c) => ({ mode: 'call', payload: { name: c.name, args: c.args, ret_args: true }, expected: { kind: 'none' } }));
          const { results, compileError } = await this.#request(job, items, async (_k, w) => w);
          if (compileError) return compileError;
          results.forEach((r, k) => outcomes.set(todo[k]!.key, 'fault' in r ? { kind: 'fatal', result: { verdict: 'sandbox_error', message: r.fault } } : callOutcome(r.result)));
          todo = todo.slice(results.length);
        }
        return undefined;
      }),
    );
    return errs.find((e) => e !== undefined);
  }

  /** The calls each assert test makes, found in the oracle by running its body with unknown
   * answers (cached by entry point, program names and source): most tests then need one pass,
   * loops over computed arguments included. */
  async #planAsserts(codes: string[], entry: string | null, names: string[], limits: WireLimits): Promise<Array<AssertPlan | undefined>> {
    const sig = `${entry ?? ''}\0${[...names].sort().join(',')}\0`;
    const todo = [...new Set(codes.filter((c) => !this.#planCache.has(sig + c)))];
    if (todo.length > 0) {
      const server = await this.#o.oracle.acquire();
      try {
        const reply = await server.call({ op: 'discover', items: todo.map((code) => ({ code, entry, names })), limits }, (limits.wall_s * todo.length + 20) * 1000);
        const plans = reply.results as AssertPlan[];
        todo.forEach((c, k) => {
          const p = plans[k];
          if (p && 'calls' in p && Array.isArray(p.calls) && p.calls.every((x) => isTagged(x.args))) this.#planCache.set(sig + c, p);
          else if (p && 'error' in p) this.#planCache.set(sig + c, p);
        });
        if (this.#planCache.size > 50_000) this.#planCache.clear();
      } catch (err) {
        // Without a plan every call is learned pass by pass; never guess a verdict.
        if (!(err instanceof SandboxFault)) throw err;
      } finally {
        this.#o.oracle.release(server);
      }
    }
    return codes.map((c) => this.#planCache.get(sig + c));
  }

  /** One oracle pass per item, spread over the oracle servers. */
  async #oracleJudge(items: Array<Record<string, unknown>>, memo: unknown[], limits: WireLimits): Promise<Array<{ w: WireResult } | { fault: string }>> {
    // Bodies of one request run in one oracle child: spread over servers only in large groups.
    const n = Math.max(1, Math.min(this.#o.oracle.size, Math.ceil(items.length / 16)));
    const idx = items.map((_, i) => i);
    const chunks = Array.from({ length: n }, (_, c) => idx.filter((i) => i % n === c));
    const out: Array<{ w: WireResult } | { fault: string }> = items.map(() => ({ fault: 'not judged' }));
    await Promise.all(
      chunks.map(async (chunk) => {
        const server = await this.#o.oracle.acquire();
        try {
          const reply = await server.call({ op: 'judge', items: chunk.map((i) => items[i]), memo, limits }, (limits.wall_s + 5) * 1000 * (chunk.length + 1) + 15_000);
          const rs = reply.results as unknown[];
          chunk.forEach((i, k) => {
            const w = WireResult.safeParse(rs[k]);
            out[i] = w.success ? { w: w.data } : { fault: 'oracle sent a malformed result' };
          });
        } catch (err) {
          if (!(err instanceof SandboxFault)) throw err;
          for (const i of chunk) out[i] = { fault: err.message };
        } finally {
          this.#o.oracle.release(server);
        }
      }),
    );
    return out;
  }

  async close(): Promise<void> {
    await Promise.all([this.#o.pool.close(), this.#o.reference.close(), this.#o.oracle.close(), this.#o.text.close()]);
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

const FATAL_TYPES = new Set(['MalformedResult', 'SystemExit']);

/** A candidate's answer to a proxied call. A failure that ends the test (limits, a signal, a
 * broken record, a failed module load) is fatal; an exception is raised again in the oracle,
 * where the test may expect it. */
function callOutcome(w: WireResult): CallOutcome {
  if (w.verdict === 'ran') {
    if (!isTagged(w.value) || (w.args !== undefined && !isTagged(w.args))) {
      return { kind: 'fatal', result: { verdict: 'runtime_error', ...malformed('the result is not a valid value') }, w };
    }
    return { kind: 'value', value: w.value, ...(w.args ? { args: w.args as Tagged[] } : {}), w };
  }
  const r: Partial<TestResult> & { verdict: Verdict } = {
    verdict: w.verdict === 'assert_failed' || w.verdict === 'need' || w.verdict === 'fatal' ? 'sandbox_error' : w.verdict,
    phase: w.phase ?? 'test',
    ...(w.exception_type ? { exceptionType: w.exception_type } : {}),
    ...(w.message ? { message: w.message } : {}),
  };
  if (w.verdict === 'runtime_error' && w.phase !== 'load' && w.exception_type && /^[A-Za-z_]\w*$/.test(w.exception_type) && !FATAL_TYPES.has(w.exception_type)) {
    return { kind: 'exc', type: w.exception_type, message: w.message ?? '', w };
  }
  return { kind: 'fatal', result: r, w };
}

function dedupe(calls: PlannedCall[]): PlannedCall[] {
  const seen = new Set<string>();
  return calls.filter((c) => !seen.has(c.key) && (seen.add(c.key), true));
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
  throw new Error('assert tests are run by #runAsserts');
}

const capped = (s: string): string => (s.length > OUTPUT_CAP ? s.slice(0, OUTPUT_CAP) : s);
