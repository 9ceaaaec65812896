/**
 * Variant positions: what a variant writes for a recorded event sits after what it wrote for the
 * events before and before anything for the next, at the same place in every variant's log, and
 * a variant's log ends at one head for every variant of a read.
 */
import { describe, expect, it } from 'vitest';
import { variantHead, variantPosition, VariantLog } from '../../src/ablation/variant-log.js';
import { MemoryBlobStore } from '../../src/events/blobs.js';
import { AblationError } from '../../src/ablation/errors.js';
import type { EventEnvelope } from '../../src/events/envelope.js';

const event = (position: number): EventEnvelope =>
  ({
    id: `e${position}`,
    type: 'RoundStarted',
    v: 1,
    runId: 'r',
    stream: 'conductor',
    position,
    commitId: `c${position}`,
    causationId: null,
    correlationId: null,
    at: new Date(0).toISOString(),
    data: { round: 1 },
  }) as unknown as EventEnvelope;

describe('variant positions', () => {
  it('order the events a variant writes by recorded event, then by its own count', () => {
    const order = [variantPosition(1, 0), variantPosition(1, 1), variantPosition(1, 65_535), variantPosition(2, 0), variantHead(2)];
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(new Set(order).size).toBe(order.length);
    expect(variantHead(2)).toBeLessThan(variantPosition(3, 0));
    expect(variantHead(0)).toBe(0);
  });

  it('refuse, saying why, more events than one recorded event can cause', () => {
    expect(() => variantPosition(7, 65_536)).toThrow(AblationError);
    expect(() => variantPosition(7, 65_536)).toThrow(/more than 65536 events for recorded event 7/);
    expect(() => variantPosition(0, 0)).toThrow(/no variant position/);
  });

  it("a variant's log ends at the head it is given, never before its last event", async () => {
    const events = [event(variantPosition(1, 0)), event(variantPosition(3, 2))];
    const log = new VariantLog('variant:x', events, new MemoryBlobStore(), variantHead(4));
    expect(await log.head()).toBe(variantHead(4));
    expect(await new VariantLog('variant:y', events, new MemoryBlobStore()).head()).toBe(variantPosition(3, 2));
    expect(() => new VariantLog('variant:z', events, new MemoryBlobStore(), variantPosition(2, 0))).toThrow(/before the last event/);
  });
});
