/**
 * Failures recorded, not fatal. On real demo runs (real SQLite log, real sandbox, real python)
 * with faults injected into real parts: a sandbox that fails its first runs, a trainer whose
 * first training step throws, a sandbox that always fails; and on the runtime with a real
 * SQLite log whose append of one commit is written but answers with an error (a lost
 * acknowledgement: the output is in the log before the failure).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { runExperiment, sandboxOptions, type RunOutcome } from '../../src/actors/run.js';
import { ActorRuntime, type ActorDefinition, type LogEvent } from '../../src/actors/runtime.js';
import { RunFailedError, backoffAfter, DEFAULT_RETRY } from '../../src/actors/effect-failures.js';
import type { PolicyBackend } from '../../src/actors/env.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventLog } from '../../src/events/log.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { createSandbox } from '../../src/sandbox/index.js';
import type { Sandbox } from '../../src/sandbox/api.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { userFacing } from '../../src/cli/errors.js';
import { recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

let root: string;
const cacheDir = catalogCache;
const figures = (rows: RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);
const FAST = { attempts: 3, backoffMs: 5, maxBackoffMs: 20 };

/** Fault injection around the real sandbox: its first `failures` runs throw (-1: every run). */
class FailingFirstSandbox implements Sandbox {
  calls = 0;
  constructor(
    readonly inner: Sandbox,
    readonly failures: number,
  ) {}
  get isolation() {
    return this.inner.isolation;
  }
  async run(request: Parameters<Sandbox['run']>[0]) {
    this.calls++;
    if (this.failures < 0 || this.calls <= this.failures) throw new Error(`sandbox worker lost (injected failure ${this.calls})`);
    return this.inner.run(request);
  }
  close() {
    return this.inner.close();
  }
}

let baseline: RunOutcome;
let sandbox: Sandbox;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-failures-'));
  const config = twoProblemConfig(root, { rounds: 2 });
  sandbox = await createSandbox(sandboxOptions(config));
  baseline = await runExperiment({ config, dir: path.join(root, 'baseline'), cacheDir: cacheDir(), sandbox });
}, 300_000);

afterAll(async () => {
  await sandbox?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('the retry schedule', () => {
  it('doubles from the first wait up to the cap', () => {
    expect([1, 2, 3, 4, 10].map((n) => backoffAfter({ attempts: 9, backoffMs: 100, maxBackoffMs: 500 }, n))).toEqual([100, 200, 400, 500, 500]);
    expect(DEFAULT_RETRY.attempts).toBeGreaterThan(1);
  });
});

describe('an effect that fails, then succeeds', () => {
  it('the executor: two failed tries recorded as EffectFailed, then the run ends as one without failures', async () => {
    const flaky = new FailingFirstSandbox(sandbox, 2);
    const run = await runExperiment({
      config: twoProblemConfig(root, { rounds: 2 }),
      dir: path.join(root, 'flaky-executor'),
      cacheDir: cacheDir(),
      sandbox: flaky,
      retry: FAST,
    });
    expect(run.finished).toBe(true);
    expect(figures(run.rows)).toEqual(figures(baseline.rows));
    const events = await recordedEvents(run.dir);
    const failed = events
      .filter((e) => e.type === 'EffectFailed')
      .map((e) => e.data as { actor: string; effectKey: string; attempt: number; willRetry: boolean; error: string });
    // The two failed sandbox runs, whichever effects met them (effects of a step run together):
    // each effect's tries are numbered from 1, and each was tried again.
    expect(failed).toHaveLength(2);
    for (const f of failed)
      expect(f).toMatchObject({ actor: 'executor', willRetry: true, error: expect.stringMatching(/sandbox worker lost \(injected failure [12]\)/) });
    const byEffect = new Map<string, number[]>();
    for (const f of failed) byEffect.set(f.effectKey, [...(byEffect.get(f.effectKey) ?? []), f.attempt]);
    for (const attempts of byEffect.values()) expect(attempts).toEqual(attempts.map((_, i) => i + 1));
    expect(events.some((e) => e.type === 'RunFailed')).toBe(false);
    // Apart from the failure records, the same log as the run without failures.
    const decisions = (list: EventEnvelope[]) => list.filter((e) => e.type !== 'EffectFailed').map((e) => ({ id: e.id, commitId: e.commitId, type: e.type }));
    expect(decisions(events)).toEqual(decisions(await recordedEvents(baseline.dir)));
  }, 300_000);

  it('the learner: a training step that throws is recorded as TrainingStepFailed and the same batch is trained again', async () => {
    let thrown = 0;
    const wrap = (backend: PolicyBackend): PolicyBackend => ({
      name: backend.name,
      exactBasis: backend.exactBasis,
      initialParams: (role) => backend.initialParams(role),
      evaluate: (params, ids, whiteBox) => backend.evaluate(params, ids, whiteBox),
      sampler: (role, params, version) => backend.sampler(role, params, version),
      trainer: (role, params, version) => {
        const inner = backend.trainer(role, params, version);
        return {
          name: inner.name,
          snapshot: () => inner.snapshot(),
          trainStep: async (request) => {
            // The test role's first step of round 1 fails, after the code role's step applied.
            if (request.role === 'test' && request.batchId.endsWith('/round/1/test') && thrown++ === 0) throw new Error('trainer process died (injected)');
            return inner.trainStep(request);
          },
        };
      },
    });
    const run = await runExperiment({
      config: twoProblemConfig(root, { rounds: 2 }),
      dir: path.join(root, 'flaky-learner'),
      cacheDir: cacheDir(),
      sandbox,
      retry: FAST,
      testOnlyWrapBackend: wrap,
    });
    expect(run.finished).toBe(true);
    expect(thrown).toBe(2);
    expect(figures(run.rows)).toEqual(figures(baseline.rows));
    const events = await recordedEvents(run.dir);
    const failed = events.filter((e) => e.type === 'TrainingStepFailed').map((e) => e.data);
    expect(failed).toEqual([{ batchId: `${run.runId}/round/1/test`, role: 'test', error: 'trainer process died (injected)', retryable: true }]);
    expect(events.some((e) => e.type === 'EffectFailed' || e.type === 'RunFailed')).toBe(false);
    // Trained once per role and round: the failed try appended nothing.
    const completed = events.filter((e) => e.type === 'TrainingStepCompleted').map((e) => (e.data as { batchId: string }).batchId);
    expect(new Set(completed).size).toBe(completed.length);
  }, 300_000);
});

describe('an effect that always fails', () => {
  it('is tried up to the limit, each try recorded, then RunFailed is written and the run stops with a clear error', async () => {
    const broken = new FailingFirstSandbox(sandbox, -1);
    const dir = path.join(root, 'broken');
    let error: unknown;
    try {
      await runExperiment({ config: twoProblemConfig(root, { rounds: 2 }), dir, cacheDir: cacheDir(), sandbox: broken, retry: FAST });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RunFailedError);
    expect((error as Error).message).toMatch(
      /actor executor failed on \S+ 3 times \(the retry limit\); last error: sandbox worker lost \(injected failure \d+\)/,
    );
    expect(userFacing(error)).toMatchObject({ exitCode: 1, message: expect.stringMatching(/RunFailed is recorded/) });
    const events = await recordedEvents(dir);
    const failed = events
      .filter((e) => e.type === 'EffectFailed')
      .map((e) => e.data as { actor: string; effectKey: string; attempt: number; willRetry: boolean });
    // Every executor effect of the step fails on its own; each one's tries are recorded.
    expect(failed.length).toBeGreaterThanOrEqual(3);
    const firstKey = failed[0]!.effectKey;
    expect(failed.filter((f) => f.effectKey === firstKey).map((f) => [f.attempt, f.willRetry])).toEqual([
      [1, true],
      [2, true],
      [3, false],
    ]);
    const runFailed = events.filter((e) => e.type === 'RunFailed');
    expect(runFailed).toHaveLength(1);
    expect((runFailed[0]!.data as { reason: string }).reason).toMatch(/actor executor failed/);
    expect(events.some((e) => e.type === 'RunCompleted')).toBe(false);
  }, 300_000);
});

describe('a failure after some outputs were appended', () => {
  // A tiny actor: for each problem of a RoundStarted, one effect that writes its ProblemScheduled.
  const machine = setup({ types: { context: {} as { todo: string[] }, events: {} as LogEvent } }).createMachine({
    context: { todo: [] },
    on: {
      RoundStarted: { actions: assign(({ event }) => ({ todo: (event.envelope.data as { problemIds: string[] }).problemIds })) },
      ProblemScheduled: {
        actions: assign(({ context, event }) => ({ todo: context.todo.filter((p) => p !== (event.envelope.data as { problemId: string }).problemId) })),
      },
    },
  });
  const scheduler: ActorDefinition<typeof machine, { key: string }, null> = {
    name: 'scheduler',
    machine,
    context: z.strictObject({ todo: z.array(z.string()) }),
    pending: (s) => s.context.todo.map((p) => ({ key: p })),
    run: async (effect) => [
      {
        type: 'ProblemScheduled',
        runId: 'r',
        data: { round: 1, problemId: effect.key, problemHash: 'a'.repeat(64), groupSize: 1, whiteBox: false, codeVersion: 0, testVersion: 0 },
      },
    ],
  };

  it('is retried: the output already written counts as done, every output is in the log once', async () => {
    const log = await openSqliteLog(path.join(root, 'lost-ack.db'));
    let lost = 0;
    // The real log, appending one commit at a time, whose second effect's first append is
    // written but answered with an error.
    const lossy: EventLog = new Proxy(log, {
      get(target, prop) {
        if (prop === 'appendCommits') return undefined;
        if (prop === 'append') {
          return async (...args: Parameters<EventLog['append']>) => {
            const result = await target.append(...args);
            if (args[2]?.commitId === 'r/scheduler/p2' && lost++ === 0) throw new Error('connection reset before the acknowledgement (injected)');
            return result;
          };
        }
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    await log.append('conductor', [{ type: 'RoundStarted', runId: 'r', data: { round: 1, problemIds: ['p1', 'p2', 'p3'] } }], { commitId: 'r/start' });
    const runtime = new ActorRuntime(lossy, 'r', null, [scheduler] as never, { retry: FAST });
    await runtime.start();
    expect(await runtime.run()).toBe(true);
    const events: EventEnvelope[] = [];
    for await (const e of log.read()) events.push(e);
    await log.close();
    expect(lost).toBe(2);
    const scheduled = events.filter((e) => e.type === 'ProblemScheduled').map((e) => (e.data as { problemId: string }).problemId);
    expect(scheduled.sort()).toEqual(['p1', 'p2', 'p3']);
    const failed = events.filter((e) => e.type === 'EffectFailed').map((e) => e.data);
    expect(failed).toEqual([
      { actor: 'scheduler', effectKey: 'p2', attempt: 1, willRetry: true, error: 'connection reset before the acknowledgement (injected)' },
    ]);
  });

  it('when the log refuses every append, the run stops with an error that says RunFailed could not be recorded', async () => {
    const log = await openSqliteLog(path.join(root, 'refusing.db'));
    await log.append('conductor', [{ type: 'RoundStarted', runId: 'r', data: { round: 1, problemIds: ['p1'] } }], { commitId: 'r/start' });
    const refusing: EventLog = new Proxy(log, {
      get(target, prop) {
        if (prop === 'appendCommits') return undefined;
        if (prop === 'append')
          return async () => {
            throw new Error('disk full (injected)');
          };
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const runtime = new ActorRuntime(refusing, 'r', null, [scheduler] as never, { retry: FAST });
    await runtime.start();
    let error: unknown;
    try {
      await runtime.run();
    } catch (e) {
      error = e;
    }
    await log.close();
    expect(error).toBeInstanceOf(RunFailedError);
    expect((error as RunFailedError).unrecorded).toBe('disk full (injected)');
    expect((error as Error).message).toMatch(/scheduler failed on p1 3 times .*last error: disk full \(injected\); RunFailed could not be recorded: disk full/);
    expect(userFacing(error)!.message).not.toMatch(/RunFailed is recorded/);
    // Three failure records and RunFailed, none written, all named.
    expect(runtime.unrecordedFailures).toHaveLength(4);
  });
});
