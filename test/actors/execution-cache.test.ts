/** The Executor's cache of recorded results: what it answers for a (program, test) pair, and
 * the same answers after a snapshot round trip. */
import { expect, it } from 'vitest';
import { ExecutionCache } from '../../src/actors/executor.js';
import { requestBody } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { compactResults, type ResultFigures } from '../../src/projections/recorded-verdicts.js';

const h = (n: number) => n.toString(16).padStart(64, '0');
const event = (type: string, data: unknown) => ({ type, data }) as unknown as EventEnvelope;
const figures = (verdict: ResultFigures['verdict'], timeMs: number): ResultFigures => ({ verdict, timeMs, memoryKb: 10, outputHash: null, exceptionType: null, isolated: true, cached: false });

it('answers each pair with its newest recorded result, never with a sandbox error, and the same after a snapshot', () => {
  const cache = new ExecutionCache();
  const pairs = [0, 1, 2].map((t) => ({ programId: 'p', programHash: h(1), testId: `t${t}`, testHash: h(100 + t) }));
  cache.observe(event('ExecutionRequested', { round: 1, problemId: 'x', requestId: 'r1', purpose: 'reward', ...requestBody(pairs) }));
  cache.observe(event('ProgramExecuted', compactResults('r1', h(1), [0, 1, 2], [figures('accepted', 1), figures('sandbox_error', 2), figures('wrong_answer', 3)], 'ran')));
  // A later request runs test 0 again (a flaky first run, say): its result answers from now on.
  cache.observe(event('ExecutionRequested', { round: 2, problemId: 'x', requestId: 'r2', purpose: 'reward', ...requestBody([pairs[0]!]) }));
  cache.observe(event('ProgramExecuted', compactResults('r2', h(1), [0], [figures('time_limit', 9)], 'ran')));
  // Results of a request never announced name no pairs.
  cache.observe(event('ProgramExecuted', compactResults('r9', h(2), [0], [figures('accepted', 1)], 'raised')));

  for (const c of [cache, ExecutionCache.restore(JSON.parse(JSON.stringify(cache.serialize())))]) {
    expect(c.get(h(1), h(100))).toMatchObject({ verdict: 'time_limit', timeMs: 9 });
    expect(c.get(h(1), h(101))).toBeUndefined();
    expect(c.get(h(1), h(102))).toMatchObject({ verdict: 'wrong_answer', timeMs: 3, isolated: true });
    expect(c.get(h(2), h(100))).toBeUndefined();
    expect(c.load(h(1))).toBe('ran');
    expect(c.load(h(2))).toBe('raised');
    expect(c.load(h(3))).toBe('unknown');
  }
});
