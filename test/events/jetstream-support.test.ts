import { JetStreamApiError } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { isTooFewServers, isTransient, withRetry } from '../../src/events/jetstream/jetstream-support.js';

const apiError = (code: number, err_code: number, description: string) => new JetStreamApiError({ code, err_code, description });

describe('which JetStream failures are retried', () => {
  it('retries a leader election and a replica whose server is away, not a cluster too small for the stream', () => {
    expect(isTransient(apiError(503, 10039, 'JetStream system temporarily unavailable'))).toBe(true);
    // Stream creation while one of three servers is partitioned off (seen in the partition test).
    expect(isTransient(apiError(500, 10005, 'no suitable peers for placement, peer offline'))).toBe(true);
    // R3 asked of a one-server cluster: waiting does not help.
    expect(isTransient(apiError(500, 10005, 'insufficient resources'))).toBe(false);
    expect(isTransient(apiError(500, 10005, 'no suitable peers for placement'))).toBe(false);
    expect(isTransient(apiError(400, 10058, 'stream name already in use with a different configuration'))).toBe(false);
  });

  it('tells a cluster too small for the replicas from a server that is away', () => {
    expect(isTooFewServers(apiError(500, 10005, 'no suitable peers for placement'))).toBe(true);
    expect(isTooFewServers(new Error('wrapped', { cause: apiError(500, 10023, 'insufficient resources') }))).toBe(true);
    expect(isTooFewServers(apiError(500, 10005, 'no suitable peers for placement, peer offline'))).toBe(false);
    expect(isTooFewServers(apiError(503, 10039, 'JetStream system temporarily unavailable'))).toBe(false);
  });

  it('finds the cause the client wrapped', () => {
    const wrapped = new Error('JetStream not enabled', { cause: apiError(500, 10005, 'no suitable peers for placement, peer offline') });
    expect(isTransient(wrapped)).toBe(true);
  });

  it('withRetry keeps trying a peer that comes back and gives up on anything else at once', async () => {
    let calls = 0;
    const v = await withRetry(5_000, async () => {
      if (++calls < 3) throw apiError(500, 10005, 'no suitable peers for placement, peer offline');
      return 'placed';
    });
    expect([v, calls]).toEqual(['placed', 3]);
    calls = 0;
    await expect(
      withRetry(5_000, async () => {
        calls++;
        throw apiError(500, 10005, 'insufficient resources');
      }),
    ).rejects.toThrow('insufficient resources');
    expect(calls).toBe(1);
  });
});
