import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { asPosition } from '../../src/events/log.js';
import { EVENT_TYPES, catalog, causedBy, isEvent, makeEvent } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { MalformedEventError, UnknownEventTypeError, UnsupportedEventVersionError } from '../../src/events/errors.js';
import { EventRegistry, defineEvent } from '../../src/events/registry.js';

const hash = createHash('sha256').update('x').digest('hex');

describe('catalog', () => {
  it('holds every event type of the mission', () => {
    expect(EVENT_TYPES).toEqual(
      expect.arrayContaining([
        'RunStarted',
        'RunCompleted',
        'RunFailed',
        'RoundStarted',
        'ProblemScheduled',
        'SolutionSampled',
        'TestsSampled',
        'ExecutionRequested',
        'ProgramExecuted',
        'ExecutionCompleted',
        'TestsJudged',
        'RewardsAssigned',
        'MistakeBookUpdated',
        'TrainingBatchFormed',
        'TrainingStepCompleted',
        'TrainingStepFailed',
        'PolicyVersionPublished',
        'RoundCompleted',
        'EffectRecorded',
      ]),
    );
    expect(catalog.currentVersion('SolutionSampled')).toBe(2);
  });

  it('makeEvent validates at the writer and names the field', () => {
    const ok = makeEvent(
      'ExecutionCompleted',
      'r',
      {
        requestId: 'q',
        programId: 'p',
        programHash: hash,
        testId: 't',
        testHash: hash,
        verdict: 'accepted',
        timeMs: 1,
        memoryKb: 2,
        outputHash: null,
        exceptionType: null,
        isolated: true,
      },
      { causationId: 'c' },
    );
    expect(ok).toMatchObject({ type: 'ExecutionCompleted', runId: 'r', causationId: 'c' });
    let err: unknown;
    try {
      makeEvent('ExecutionCompleted', 'r', { ...ok.data, verdict: 'exploded' as 'accepted', programHash: 'abc' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MalformedEventError);
    expect((err as MalformedEventError).issues.map((i) => i.path).sort()).toEqual(['data.programHash', 'data.verdict']);
    expect(() => makeEvent('RunFailed', 'r', { reason: 'x', extra: 1 } as { reason: string })).toThrow(/extra/);
  });

  it('upcasts SolutionSampled v1 (no temperature) to v2 with temperature null', () => {
    const v1 = {
      round: 1,
      problemId: 'p',
      solutionId: 's',
      programHash: hash,
      policy: { role: 'code', name: 'toy', version: 3 },
      sampling: { seed: 1, index: 2, candidateId: null },
      responseHash: null,
    };
    const { v, data } = catalog.decode('SolutionSampled', 1, v1, { position: 9 });
    expect(v).toBe(2);
    expect((data as { sampling: { temperature: unknown } }).sampling.temperature).toBeNull();
    // A v1 record that already carried a temperature keeps it.
    const kept = catalog.decode('SolutionSampled', 1, { ...v1, sampling: { ...v1.sampling, temperature: 0.7 } }, {});
    expect((kept.data as { sampling: { temperature: unknown } }).sampling.temperature).toBe(0.7);
  });

  it('isEvent narrows data to the type', () => {
    const env: EventEnvelope = {
      id: 'i',
      type: 'RoundStarted',
      v: 1,
      runId: 'r',
      stream: 's',
      position: asPosition(1),
      commitId: 'c',
      causationId: null,
      correlationId: 'corr',
      at: '2024-01-01T00:00:00Z',
      data: { round: 2, problemIds: ['a'] },
    };
    expect(isEvent(env, 'RoundStarted') && env.data.problemIds[0]).toBe('a');
    expect(isEvent(env, 'RoundCompleted')).toBe(false);
    expect(causedBy(env)).toEqual({ causationId: 'i', correlationId: 'corr' });
  });
});

describe('registry', () => {
  const reg = new EventRegistry({
    Thing: defineEvent({
      version: 3,
      schema: z.strictObject({ name: z.string(), size: z.int() }),
      upcasters: {
        2: (d) => ({ ...(d as object), size: 0 }),
        1: (d) => ({ name: (d as { title: string }).title }),
      },
    }),
  });

  it('chains upcasters v1 -> v2 -> v3', () => {
    expect(reg.decode('Thing', 1, { title: 't' }, {})).toEqual({ v: 3, data: { name: 't', size: 0 } });
    expect(reg.decode('Thing', 2, { name: 'u' }, {})).toEqual({ v: 3, data: { name: 'u', size: 0 } });
    expect(reg.decode('Thing', 3, { name: 'w', size: 4 }, {})).toEqual({ v: 3, data: { name: 'w', size: 4 } });
  });

  it('refuses unknown types and versions it cannot lift, with where', () => {
    expect(() => reg.decode('Other', 1, {}, { position: 4 })).toThrow(UnknownEventTypeError);
    expect(() => reg.decode('Thing', 4, {}, { position: 5 })).toThrow(/position 5: Thing v4 .*newer/);
    expect(() => reg.decode('Thing', 0, {}, { position: 6 })).toThrow(UnsupportedEventVersionError);
    const noV1 = new EventRegistry({ T: defineEvent({ version: 2, schema: z.object({}), upcasters: {} }) });
    expect(() => noV1.decode('T', 1, {}, { position: 7 })).toThrow(/no upcaster/);
  });

  it('rejects definitions whose upcasters do not fit the version', () => {
    expect(() => defineEvent({ version: 2, schema: z.object({}), upcasters: { 2: (d) => d } })).toThrow(/upcaster from v2/);
    expect(() => defineEvent({ version: 0, schema: z.object({}) })).toThrow(/version/);
  });
});
