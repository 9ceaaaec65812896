/**
 * One way to run an effect: the runtime's steps, a worker's `runEffect`/`runWorkOf` and an
 * ablation's executions all go through EffectRunner, so each failed try is recorded in the log
 * and the same retry limit ends the run with RunFailed. On a real SQLite log.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActorFailedError, EffectRunner } from '../../src/actors/effect-runner.js';
import { ActorRuntime, type ActorDefinition, type LogEvent } from '../../src/actors/runtime.js';
import { RunFailedError } from '../../src/actors/effect-failures.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventLog } from '../../src/events/log.js';
import type { EventEnvelope } from '../../src/events/envelope.js';

const FAST = { attempts: 3, backoffMs: 1, maxBackoffMs: 2 };
let root: string;
let n = 0;
const fresh = async (): Promise<EventLog> => openSqliteLog(path.join(root, `log-${n++}.db`), { create: true });
const all = async (log: EventLog): Promise<EventEnvelope[]> => {
  const out: EventEnvelope[] = [];
  for await (const e of log.read({})) out.push(e);
  return out;
};
const started = (runId: string) => ({
  type: 'RunStarted' as const,
  runId,
  data: { method: 'code-a1', config: {}, configHash: 'a'.repeat(64), seed: 1, crucibleVersion: 't', problems: [], catalogHash: 'b'.repeat(64) },
});

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-effect-runner-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('EffectRunner', () => {
  it('records each failed try, then returns the output as the commit under the effect commit id', async () => {
    const log = await fresh();
    const runner = new EffectRunner(log, 'r1', FAST);
    let tries = 0;
    const commit = await runner.run(
      {
        actor: 'executor',
        effect: { key: 'k1' },
        env: null,
        run: async () => {
          if (++tries < 3) throw new Error(`lost ${tries}`);
          return [{ type: 'RunCompleted', runId: 'r', data: { rounds: 1 } }];
        },
      },
      '7',
    );
    expect(commit.options.commitId).toBe('r1/executor/k1');
    expect(commit.events[0]!.type).toBe('RunCompleted');
    const failed = (await all(log)).filter((e) => e.type === 'EffectFailed').map((e) => e.data as { attempt: number; willRetry: boolean; error: string });
    expect(failed).toEqual([
      expect.objectContaining({ attempt: 1, willRetry: true, error: 'lost 1' }),
      expect.objectContaining({ attempt: 2, willRetry: true, error: 'lost 2' }),
    ]);
    await log.close();
  });

  it("past the limit records RunFailed once and stops with RunFailedError; an empty output is the actor's bug", async () => {
    const log = await fresh();
    const runner = new EffectRunner(log, 'r2', FAST);
    const failing = (key: string) => ({ actor: 'judge', effect: { key }, env: null, run: async () => Promise.reject(new Error('always')) });
    await expect(runner.run(failing('a'), '1')).rejects.toBeInstanceOf(RunFailedError);
    await expect(runner.run(failing('b'), '1')).rejects.toBeInstanceOf(RunFailedError);
    const types = (await all(log)).map((e) => e.type);
    expect(types.filter((t) => t === 'EffectFailed')).toHaveLength(6);
    expect(types.filter((t) => t === 'RunFailed')).toHaveLength(1);
    await expect(runner.run({ actor: 'judge', effect: { key: 'c' }, env: null, run: async () => [] }, '1')).rejects.toBeInstanceOf(ActorFailedError);
    await log.close();
  });
});

describe("a worker's effect (ActorRuntime.runEffect) follows the same policy", () => {
  interface Ctx {
    started: boolean;
    done: boolean;
  }
  const machine = setup({ types: { context: {} as Ctx, events: {} as LogEvent } }).createMachine({
    id: 'finisher',
    context: { started: false, done: false },
    on: {
      RunStarted: { actions: assign({ started: true }) },
      RunCompleted: { actions: assign({ done: true }) },
    },
  });

  it('a failing try is recorded and retried in the process, not thrown at the first failure', async () => {
    const log = await fresh();
    await log.append('conductor', [started('r3')], { commitId: 'r3/start' });
    let tries = 0;
    const def: ActorDefinition<typeof machine, { key: string }, null> = {
      name: 'finisher',
      machine,
      context: z.object({ started: z.boolean(), done: z.boolean() }),
      pending: (s) => (s.context.started && !s.context.done ? [{ key: 'finish' }] : []),
      run: async () => {
        if (++tries === 1) throw new Error('a lost connection');
        return [{ type: 'RunCompleted', runId: 'r', data: { rounds: 1 } }];
      },
    };
    const runtime = new ActorRuntime(log, 'r3', null, [def as never], { retry: FAST });
    await runtime.start();
    const [effect] = runtime.pendingOf('finisher');
    const commit = await runtime.runEffect('finisher', effect!);
    expect(commit.options.commitId).toBe('r3/finisher/finish');
    expect(tries).toBe(2);
    const failed = (await all(log)).filter((e) => e.type === 'EffectFailed');
    expect(failed.map((e) => (e.data as { effectKey: string; attempt: number }).attempt)).toEqual([1]);
    await log.close();
  });
});
