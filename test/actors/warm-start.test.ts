/**
 * The warm start's pure parts: the batch of a step derived from the seed and the step alone (the
 * batches one pass of the steps draws, from any step on), which chunk is pending after which
 * recorded checkpoint, and what the progress view says.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import {
  NO_WARM_START,
  WarmStartWatch,
  foldWarmStartCheckpoint,
  sftBatch,
  warmStartPending,
  warmStartPlan,
  warmVersions,
  type WarmStartState,
} from '../../src/actors/warm-start.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import type { EventData } from '../../src/events/catalog.js';
import { smallConfig } from '../support/small-config.js';
import { parseConfig } from '../../src/config/load.js';

/** A small served run's config with this learner.sft (nothing is started from it). */
function sftConfig(sft: Record<string, unknown>) {
  const openai = { baseUrl: 'http://127.0.0.1:9/v1', model: 'toy-policy' };
  return parseConfig({
    ...smallConfig('/nowhere'),
    policies: { code: { backend: 'openai', lr: 0.001, openai }, test: { backend: 'openai', lr: 0.001, openai } },
    learner: { bridge: { backend: 'toy' }, sft },
  });
}

/** The batches as one loop over every step draws them: seeded passes over the rows, a new
 * shuffle each pass from one generator. */
function sequentialBatches<T>(rows: readonly T[], seed: number, batchSize: number, steps: number): T[][] {
  const rng = Rng.derive(seed, 'order');
  let order: T[] = [];
  const out: T[][] = [];
  for (let step = 1; step <= steps; step++) {
    const batch: T[] = [];
    while (batch.length < Math.min(batchSize, rows.length)) {
      if (order.length === 0) order = rng.shuffle(rows);
      batch.push(order.shift()!);
    }
    out.push(batch);
  }
  return out;
}

describe('the batch of a step', () => {
  it.each([
    [7, 3],
    [12, 4],
    [5, 12],
    [1, 2],
  ])('is the batch one loop over the steps draws (%i rows, batches of %i), computed from the step alone', (n, batchSize) => {
    const rows = Array.from({ length: n }, (_, i) => `row${i}`);
    const seed = 9_876_543;
    const expected = sequentialBatches(rows, seed, batchSize, 40);
    const got = Array.from({ length: 40 }, (_, i) => sftBatch(rows, seed, batchSize, i + 1));
    expect(got).toEqual(expected);
    // Another seed draws other batches.
    if (n > 2) expect(Array.from({ length: 40 }, (_, i) => sftBatch(rows, seed + 1, batchSize, i + 1))).not.toEqual(expected);
  });
});

const checkpoint = (role: 'code' | 'test', step: number, steps: number, cached = false): EventData<'WarmStartCheckpointed'> => ({
  role,
  step,
  steps,
  policy: { role, name: `bridge:${role}`, version: step },
  checkpoint: 'a'.repeat(64),
  key: 'b'.repeat(64),
  cached,
});

describe('the chunks of a warm start', () => {
  it('plans the configured roles with their steps; none without learner.sft', () => {
    expect(warmStartPlan(sftConfig({ steps: { code: 5, test: 3 }, batchSize: 2 })).plan).toEqual([
      { role: 'code', steps: 5 },
      { role: 'test', steps: 3 },
    ]);
    expect(warmStartPlan(sftConfig({ steps: 4, roles: ['test'] })).plan).toEqual([{ role: 'test', steps: 4 }]);
    expect(warmStartPlan(smallConfig('/nowhere'))).toEqual(NO_WARM_START);
    expect(warmStartPending(NO_WARM_START)).toBeNull();
  });

  it('goes on from the last recorded step, one role after the other, then nothing is pending', () => {
    let s: WarmStartState = {
      plan: [
        { role: 'code', steps: 5 },
        { role: 'test', steps: 3 },
      ],
      at: {},
    };
    const keys: string[] = [];
    const record = (d: EventData<'WarmStartCheckpointed'>) => {
      keys.push(warmStartPending(s)!.key);
      s = foldWarmStartCheckpoint(s, d);
    };
    record(checkpoint('code', 2, 5));
    expect(warmStartPending(s)).toEqual({ key: 'sft/code/2', kind: 'sft', role: 'code', step: 2, version: 2 });
    record(checkpoint('code', 5, 5));
    record(checkpoint('test', 3, 3, true));
    expect(keys).toEqual(['sft/code/0', 'sft/code/2', 'sft/test/0']);
    expect(warmStartPending(s)).toBeNull();
    expect(warmVersions(s)).toEqual({ code: 5, test: 3 });
  });
});

describe('the progress of a warm start', () => {
  let position = 0;
  const envelope = (type: string, data: unknown) => ({ type, data, position: BigInt(++position) }) as unknown as EventEnvelope;

  it('is the last recorded step with its loss until round 1 starts; a cached checkpoint has no loss', () => {
    const watch = new WarmStartWatch();
    const config = sftConfig({ steps: { code: 4, test: 2 } });
    watch.observe(envelope('RunStarted', { config }));
    expect(watch.current).toEqual({ role: 'code', step: 0, steps: 4, loss: null });
    watch.observe(envelope('TrainingStepCompleted', { round: 0, role: 'code', metrics: { loss: 2.5 } }));
    watch.observe(envelope('TrainingStepCompleted', { round: 0, role: 'code', metrics: { loss: 2.25 } }));
    watch.observe(envelope('WarmStartCheckpointed', checkpoint('code', 2, 4)));
    expect(watch.current).toEqual({ role: 'code', step: 2, steps: 4, loss: 2.25 });
    watch.observe(envelope('WarmStartCheckpointed', checkpoint('test', 2, 2, true)));
    expect(watch.current).toEqual({ role: 'test', step: 2, steps: 2, loss: null });
    watch.observe(envelope('RoundStarted', { round: 1 }));
    expect(watch.current).toBeNull();
  });

  it('is null throughout a run without a warm start', () => {
    const watch = new WarmStartWatch();
    watch.observe(envelope('RunStarted', { config: smallConfig('/nowhere') }));
    expect(watch.current).toBeNull();
  });
});
