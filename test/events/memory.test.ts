import { describe, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import { MemoryLogStore } from '../../src/events/memory/memory-log.js';
import { describeEventLogConformance } from './conformance.js';
import { describeWorkQueueContract } from './work-queue-contract.js';

describeEventLogConformance('memory', async () => {
  const store = new MemoryLogStore();
  return { open: async (opts) => store.open(opts), dispose: async () => {} };
});

describeWorkQueueContract('memory', async () => {
  const store = new MemoryLogStore();
  return { open: async () => store.open(), dispose: async () => {} };
});

describe('memory log: the dedup window', () => {
  it('forgets a commit id once its window has passed; inside it a retry is a duplicate', async () => {
    let now = 1_000_000;
    const log = new MemoryLogStore({ dedupWindowMs: 120_000, now: () => now }).open();
    expect(log.capabilities.dedupWindowMs).toBe(120_000);
    const e = makeEvent('RunFailed', 'r', { reason: 'x' }, { id: undefined });
    const first = await log.append('s', [e], { commitId: 'c' });
    now += 119_000;
    expect(await log.append('s', [e], { commitId: 'c' })).toEqual({ positions: first.positions, duplicate: true });
    now += 2_000;
    // Past the window the id is new again: the same derived event id is now refused as reused,
    // which is why writers must not retry a commit after its window.
    await expect(log.append('s', [e], { commitId: 'c' })).rejects.toThrow(/already in the log/);
  });
});
