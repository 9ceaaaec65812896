/**
 * The Executor runs (program, test) pairs in the sandbox and records one verdict per pair.
 * It groups a request's pairs by program so that the sandbox runs many tests per program in one
 * call; the tests it receives already carry the oracle outputs the Judge chose.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import { withoutKey, type ActorDefinition, type LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { dataOf } from './events.js';
import { TestCase } from '../core/problem.js';
import type { EventData } from '../events/catalog.js';

type Request = EventData<'ExecutionRequested'>;

export interface ExecutorContext {
  requests: (Request & { key: string })[];
}

export const executorMachine = setup({
  types: { context: {} as ExecutorContext, events: {} as LogEvent },
}).createMachine({
  id: 'executor',
  context: { requests: [] },
  on: {
    ExecutionRequested: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ExecutionRequested');
        if (d.pairs.length === 0) return {};
        return { requests: [...context.requests, { ...d, key: d.requestId }] };
      }),
    },
    ExecutionCompleted: {
      actions: assign(({ context, event }) => {
        const id = dataOf(event.envelope, 'ExecutionCompleted').requestId;
        return { requests: withoutKey(context.requests, id) };
      }),
    },
  },
});

export type ExecutorEffect = ExecutorContext['requests'][number];

type Completed = EventData<'ExecutionCompleted'>;

/** Verdicts already recorded, by (program, test): the same pair is never run twice in a run.
 * Rebuilt by folding the log, so a restarted Executor has the same cache. */
export class ExecutionCache {
  readonly #byPair = new Map<string, Completed>();
  static key(programHash: string, testHash: string): string {
    return `${programHash}:${testHash}`;
  }
  observe(d: Completed): void {
    // sandbox_error is the sandbox's failure, not the program's: worth running again.
    if (d.verdict !== 'sandbox_error') this.#byPair.set(ExecutionCache.key(d.programHash, d.testHash), d);
  }
  get(programHash: string, testHash: string): Completed | undefined {
    return this.#byPair.get(ExecutionCache.key(programHash, testHash));
  }
  /** For actor snapshots: the recorded verdicts, and a cache holding them. */
  serialize(): unknown {
    return [...this.#byPair.values()];
  }
  static restore(data: unknown): ExecutionCache {
    const cache = new ExecutionCache();
    for (const d of data as Completed[]) cache.observe(d);
    return cache;
  }
}

async function loadTest(env: RunEnv, hash: string): Promise<TestCase> {
  return TestCase.parse(JSON.parse(await env.blobs.getText(hash)));
}

export const executor: ActorDefinition<typeof executorMachine, ExecutorEffect, RunEnv, ExecutionCache> = {
  name: 'executor',
  machine: executorMachine,
  pending: (snapshot: SnapshotFrom<typeof executorMachine>) => snapshot.context.requests,
  // All verdicts of a request are one commit; the machine reads only the request id.
  foldOncePerCommit: ['ExecutionCompleted'],
  index: {
    create: () => new ExecutionCache(),
    observe(cache, envelope) {
      if (envelope.type === 'ExecutionCompleted') cache.observe(envelope.data as Completed);
    },
    types: ['ExecutionCompleted'],
    serialize: (cache) => cache.serialize(),
    restore: (data) => ExecutionCache.restore(data),
  },
  async run(request, env, _snapshot, cache) {
    const problem = env.problem(request.problemId);
    const results = new Array<Completed | undefined>(request.pairs.length);
    // Each distinct test is read and parsed once per request, not once per program running it.
    const tests = new Map<string, Promise<TestCase>>();
    const testOf = (hash: string) => tests.get(hash) ?? tests.set(hash, loadTest(env, hash)).get(hash)!;
    const byProgram = new Map<string, number[]>();
    request.pairs.forEach((pair, i) => {
      const hit = cache.get(pair.programHash, pair.testHash);
      if (hit) {
        results[i] = { ...hit, requestId: request.requestId, programId: pair.programId, testId: pair.testId, cached: true };
        return;
      }
      const list = byProgram.get(pair.programHash) ?? [];
      list.push(i);
      byProgram.set(pair.programHash, list);
    });
    await Promise.all(
      [...byProgram].map(async ([programHash, indexes]) => {
        const program = await env.blobs.getText(programHash);
        // A test listed twice for one program (two samples of one candidate) runs once.
        const unique = [...new Set(indexes.map((i) => request.pairs[i]!.testHash))];
        const verdicts = await env.sandbox.run({
          program,
          // The reference (oracle outputs) runs on a pool of its own, never beside candidates.
          role: indexes.some((i) => request.pairs[i]!.programId === 'reference') ? 'reference' : 'candidate',
          tests: await Promise.all(unique.map(testOf)),
          entryPoint: problem.entryPoint,
          limits: problem.limits,
          comparison: problem.comparison,
          checker: problem.checker,
        });
        const byTest = new Map<string, (typeof verdicts)[number]>();
        for (const v of verdicts) byTest.set(unique[v.test]!, v);
        for (const i of indexes) {
          const pair = request.pairs[i]!;
          const v = byTest.get(pair.testHash);
          if (!v) continue;
          results[i] = {
            requestId: request.requestId,
            programId: pair.programId,
            programHash: pair.programHash,
            testId: pair.testId,
            testHash: pair.testHash,
            verdict: v.verdict,
            timeMs: v.timeMs,
            memoryKb: v.memoryKb,
            outputHash: v.output === undefined ? null : await env.blobs.put(v.output),
            exceptionType: v.exceptionType ?? null,
            isolated: v.isolated,
            cached: false,
          };
        }
      }),
    );
    return results.map((data, i) => {
      if (!data) throw new Error(`sandbox returned no result for pair ${i} of ${request.requestId}`);
      return env.event('ExecutionCompleted', data);
    });
  },
};
