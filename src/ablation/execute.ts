/**
 * `--execute`: the executions a variant needs that the recorded log lacks (a wider Mistake Book
 * replay asks for tests on programs that never ran them), run by the Executor's own effect in a
 * real sandbox and recorded in the variant's own log, a SQLite event log beside its read models.
 * The recorded run is only read: its blobs are read through an overlay whose writes go to the
 * variant's log. A request already in the variant's log (an earlier call stopped before its read
 * models were written) is answered from there, not run again.
 */
import { initialTransition } from 'xstate';
import type { RunConfig } from '../config/schema.js';
import type { Problem } from '../core/problem.js';
import { ExecutionCache, executor, executorMachine } from '../actors/executor.js';
import { RunEnv } from '../actors/env.js';
import { EffectRunner } from '../actors/effect-runner.js';
import { catalog, requestBody, type EventData, type ExecutionPair } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import type { BlobStore } from '../events/blobs.js';
import type { EventLog } from '../events/log.js';
import type { Sandbox } from '../sandbox/api.js';
import { OverlayBlobStore } from './variant-log.js';
import { NO_POLICIES } from './rejudge.js';
import { openSqliteLog } from '../events/sqlite/sqlite-log.js';

/** How to run new executions: the sandbox is started on first need, once per call, from the
 * recorded config (its executor settings), and closed when the call ends. */
export interface ExecuteOptions {
  sandbox(config: RunConfig): Promise<Sandbox>;
}

/** The stream a variant's execution requests are written to (its re-judgement asked for them). */
const REQUEST_STREAM = 'judge';
const RESULT_STREAM = 'executor';

/** One lazily started sandbox shared by the variants of a call. */
export class SharedSandbox {
  readonly #options: ExecuteOptions;
  readonly #config: RunConfig;
  #sandbox: Promise<Sandbox> | null = null;

  constructor(options: ExecuteOptions, config: RunConfig) {
    this.#options = options;
    this.#config = config;
  }

  get(): Promise<Sandbox> {
    return (this.#sandbox ??= this.#options.sandbox(this.#config));
  }

  async close(): Promise<void> {
    // A sandbox that failed to start has nothing to close (its error went to the variant).
    if (this.#sandbox)
      await this.#sandbox.then(
        (s) => s.close(),
        () => undefined,
      );
  }
}

export class VariantExecutions {
  readonly file: string;
  readonly #base: BlobStore;
  readonly #sandbox: SharedSandbox;
  readonly #runId: string;
  readonly #config: RunConfig;
  readonly #problems: readonly Problem[];
  #log: Promise<{ log: EventLog; byRequest: Map<string, EventEnvelope[]> }> | null = null;
  /** Executions run in this call (not those found in the variant's log). */
  executed = 0;

  constructor(opts: { file: string; blobs: BlobStore; sandbox: SharedSandbox; runId: string; config: RunConfig; problems: readonly Problem[] }) {
    this.file = opts.file;
    this.#base = opts.blobs;
    this.#sandbox = opts.sandbox;
    this.#runId = opts.runId;
    this.#config = opts.config;
    this.#problems = opts.problems;
  }

  /** The variant's log, opened (and created) on first need, with what it holds by request. */
  #opened(): Promise<{ log: EventLog; byRequest: Map<string, EventEnvelope[]> }> {
    return (this.#log ??= (async () => {
      const log: EventLog = await openSqliteLog(this.file, { create: true });
      const byRequest = new Map<string, EventEnvelope[]>();
      for await (const e of log.read({}, { runId: this.#runId })) {
        const requestId = (e.data as { requestId?: string }).requestId;
        if (requestId === undefined) continue;
        byRequest.set(requestId, [...(byRequest.get(requestId) ?? []), e]);
      }
      return { log, byRequest };
    })());
  }

  /**
   * Executes `pairs` of problem-round (`round`, `problemId`) as request `requestId` (purpose
   * mistake-book) and returns the request and its results as recorded in the variant's log.
   */
  async run(round: number, problemId: string, requestId: string, pairs: readonly ExecutionPair[]): Promise<EventEnvelope[]> {
    const { log, byRequest } = await this.#opened();
    const known = byRequest.get(requestId) ?? [];
    const asked = known.find((e) => e.type === 'ExecutionRequested');
    if (asked && known.some((e) => e.type === 'ProgramExecuted')) return known;
    const data: EventData<'ExecutionRequested'> = { round, problemId, requestId, purpose: 'mistake-book', ...requestBody(pairs, []) };
    const before = await log.head();
    if (!asked)
      await log.append(REQUEST_STREAM, [{ type: 'ExecutionRequested', runId: this.#runId, data: catalog.encode('ExecutionRequested', data, {}).data }], {
        commitId: requestId,
      });
    const env = new RunEnv({
      runId: this.#runId,
      config: this.#config,
      blobs: new OverlayBlobStore(this.#base, log.blobs),
      sandbox: await this.#sandbox.get(),
      backend: NO_POLICIES,
      problems: this.#problems,
    });
    // Run as the runtime runs an effect (retries, each failed try recorded in the variant's log);
    // the results keep the variant log's own commit id.
    const runner = new EffectRunner(log, this.#runId);
    const run = () => executor.run({ ...data, key: requestId }, env, initialTransition(executorMachine)[0], new ExecutionCache());
    const commit = await runner.run({ actor: executor.name, effect: { key: requestId }, env, run }, 'ablation');
    await log.append(RESULT_STREAM, commit.events, { commitId: `${requestId}/results` });
    this.executed += pairs.length;
    const out: EventEnvelope[] = asked ? [asked] : [];
    for await (const e of log.read({ after: before }, { runId: this.#runId })) out.push(e);
    byRequest.set(requestId, out);
    return out;
  }

  async close(): Promise<void> {
    if (this.#log) await (await this.#log).log.close();
  }
}
