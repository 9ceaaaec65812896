/** The Executor's cache of recorded results: what it answers for a (program, test) pair, read
 * from the log where the cache says they are, and the same answers after a snapshot round trip
 * (body and side rows). */
import { expect, it } from 'vitest';
import { ExecutionCache } from '../../src/actors/executor.js';
import { requestBody } from '../../src/events/catalog.js';
import { sideTable } from '../support/side-table.js';
import { figures, foldingLog, h } from '../support/folding-log.js';
import { compactResults } from '../../src/events/program-executed.js';
import type { ReadAt } from '../../src/events/read-at.js';

const roundTrip = (cache: ExecutionCache, table: ReturnType<typeof sideTable>, read: ReadAt) => {
  table.save(cache.sideRows());
  cache.sideSaved();
  return ExecutionCache.restore(JSON.parse(JSON.stringify(cache.serialize())), table.reader(), read);
};
/** A pair's recorded result, as a request of the Executor reads it. */
const get = async (cache: ExecutionCache, program: string, test: string) =>
  (await cache.resultsOf('x', [{ programHash: program, testHash: test }])).get(program, test);

it('answers each pair with its newest recorded result, never with a sandbox error, and the same after a snapshot', async () => {
  const { event, read } = foldingLog();
  const cache = new ExecutionCache(null, read);
  const pairs = [0, 1, 2].map((t) => ({ programId: 'p', programHash: h(1), testId: `t${t}`, testHash: h(100 + t) }));
  cache.observe(await event('ExecutionRequested', { round: 1, problemId: 'x', requestId: '1/x/r1', purpose: 'reward', ...requestBody(pairs) }));
  cache.observe(
    await event(
      'ProgramExecuted',
      compactResults('1/x/r1', h(1), [0, 1, 2], [figures('accepted', 1), figures('sandbox_error', 2), figures('wrong_answer', 3)], 'ran'),
    ),
  );
  // A later request runs test 0 again (a flaky first run, say): its result answers from now on.
  cache.observe(await event('ExecutionRequested', { round: 2, problemId: 'x', requestId: '2/x/r2', purpose: 'reward', ...requestBody([pairs[0]!]) }));
  cache.observe(await event('ProgramExecuted', compactResults('2/x/r2', h(1), [0], [figures('time_limit', 9)], 'ran')));
  // Results of a request never announced name no problem and no pairs: nothing is recorded of
  // them, not even the load outcome; a program whose only results are sandbox errors has no
  // results recorded either.
  cache.observe(await event('ProgramExecuted', compactResults('9/x/r9', h(2), [0], [figures('accepted', 1)], 'raised')));
  cache.observe(
    await event('ExecutionRequested', {
      round: 3,
      problemId: 'x',
      requestId: '3/x/r3',
      purpose: 'reward',
      ...requestBody([{ ...pairs[0]!, programHash: h(3) }]),
    }),
  );
  cache.observe(await event('ProgramExecuted', compactResults('3/x/r3', h(3), [0], [figures('sandbox_error', 1)], 'unknown')));

  const table = sideTable();
  for (const c of [cache, roundTrip(cache, table, read)]) {
    expect(await get(c, h(1), h(100))).toMatchObject({ verdict: 'time_limit', timeMs: 9 });
    expect(await get(c, h(1), h(101))).toBeUndefined();
    expect(await get(c, h(1), h(102))).toMatchObject({ verdict: 'wrong_answer', timeMs: 3, isolated: true });
    expect(await get(c, h(2), h(100))).toBeUndefined();
    expect(await get(c, h(3), h(100))).toBeUndefined();
    expect(c.load('x', h(1))).toBe('ran');
    expect(c.load('x', h(2))).toBe('unknown');
    expect(c.load('x', h(3))).toBe('unknown');
    expect(c.load('x', h(4))).toBe('unknown');
    // The problem is the scope: another problem's same pair is not answered.
    expect(await c.resultsOf('y', [{ programHash: h(1), testHash: h(100) }])).toMatchObject({ byProgram: new Map() });
    expect(c.load('y', h(1))).toBe('unknown');
  }
});

it('a restored cache answers from the side rows and its own later records, and its body does not grow with the records', async () => {
  const { event, read } = foldingLog();
  const table = sideTable();
  const cache = new ExecutionCache(null, read);
  const pairs = [0, 1].map((t) => ({ programId: 'p', programHash: h(1), testId: `t${t}`, testHash: h(100 + t) }));
  cache.observe(await event('ExecutionRequested', { round: 1, problemId: 'x', requestId: '1/x/r1', purpose: 'reward', ...requestBody(pairs) }));
  cache.observe(await event('ProgramExecuted', compactResults('1/x/r1', h(1), [0, 1], [figures('accepted', 1), figures('wrong_answer', 2)], 'ran')));
  const body = JSON.stringify(cache.serialize());
  const restored = roundTrip(cache, table, read);
  // The index went to a side row: the body holds the requests in flight (none).
  expect(JSON.stringify(restored.serialize())).toBe(body);
  expect(body).toBe('{"awaiting":[]}');
  expect(restored.recorded()).toEqual(cache.recorded());
  // Folded after the restore: a newer result of test 0, a new program, a worse load outcome.
  const later = [0, 2].map((t) => ({ programId: 'p', programHash: h(t === 0 ? 1 : 2), testId: `t${t}`, testHash: h(100 + t) }));
  const events = [
    await event('ExecutionRequested', { round: 2, problemId: 'x', requestId: '2/x/r2', purpose: 'reward', ...requestBody(later) }),
    await event('ProgramExecuted', compactResults('2/x/r2', h(1), [0], [figures('time_limit', 7)], 'raised')),
    await event('ProgramExecuted', compactResults('2/x/r2', h(2), [1], [figures('accepted', 3)], 'ran')),
  ];
  for (const c of [cache, restored]) for (const e of events) c.observe(e);
  const newRows = restored.sideRows();
  expect(newRows.replace).toBe(false);
  // One row per program changed, not per result: each names where its results are; and the
  // problem's directory, which gained a program.
  expect(newRows.rows.map(([k]) => String.fromCharCode(k[0]!))).toEqual(['d', 'p', 'p']);
  for (const c of [cache, restored]) {
    expect(await get(c, h(1), h(100))).toMatchObject({ verdict: 'time_limit', timeMs: 7 });
    expect(await get(c, h(1), h(101))).toMatchObject({ verdict: 'wrong_answer', timeMs: 2 });
    expect(await get(c, h(2), h(102))).toMatchObject({ verdict: 'accepted', timeMs: 3 });
    expect(c.load('x', h(1))).toBe('raised');
    expect(c.load('x', h(2))).toBe('ran');
  }
  expect(roundTrip(restored, table, read).recorded()).toEqual(cache.recorded());
});

it("keeps memory and side rows bounded while a problem's reference runs on every new test of the run, and answers its old pairs from the log", async () => {
  const { event, read } = foldingLog();
  const cache = new ExecutionCache(null, read);
  const kept = new ExecutionCache(null, read);
  const table = sideTable();
  const ref = h(42);
  const testOf = (step: number, t: number) => h(5_000_000 + step * 100 + t);
  const held: number[] = [];
  const rowBytes: number[] = [];
  const steps = 40;
  for (let step = 1; step <= steps; step++) {
    const pairs = Array.from({ length: 16 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `t${t}`, testHash: testOf(step, t) }));
    const recorded = await cache.resultsOf('x', pairs);
    for (const p of pairs) expect(recorded.get(ref, p.testHash)).toBeUndefined();
    // An earlier step's test is asked about (and answered) as a plan would.
    if (step > 1) expect(await get(cache, ref, testOf(step - 1, 3))).toMatchObject({ timeMs: (step - 1) * 10 + 3 });
    const folded = [
      await event('ExecutionRequested', { round: step, problemId: 'x', requestId: `${step}/x/oracle`, purpose: 'oracle', ...requestBody(pairs) }),
      await event(
        'ProgramExecuted',
        compactResults(
          `${step}/x/oracle`,
          ref,
          pairs.map((_, i) => i),
          pairs.map((_, t) => figures(t % 3 === 0 ? 'wrong_answer' : 'accepted', step * 10 + t)),
          'ran',
        ),
      ),
    ];
    for (const c of [cache, kept]) for (const e of folded) c.observe(e);
    held.push(cache.heldEntries);
    const rows = cache.sideRows();
    rowBytes.push(rows.rows.reduce((n, [k, v]) => n + k.length + v.length, 0));
    table.save(rows);
    cache.sideSaved(table.reader());
  }
  // What the cache holds in a step is the program it was asked about: the same at the last step as at the second.
  expect(Math.max(...held)).toBe(1);
  expect(kept.heldEntries).toBe(1);
  // One row for the reference: per step two numbers (3 bytes each at commit x 2^16 positions) and
  // per test its fingerprint and the event's place (6 + 1 bytes): about 7 bytes a result.
  expect(rowBytes.at(-1)).toBeLessThanOrEqual(34 + 1 + 1 + steps * 6 + steps * 16 * 7);
  expect(rowBytes.at(-1)! / (steps * 16)).toBeLessThan(8);
  expect(cache.recorded()).toEqual(kept.recorded());
  for (const [step, t] of [
    [1, 0],
    [7, 3],
    [steps, 15],
  ] as const) {
    expect(await get(cache, ref, testOf(step, t))).toEqual(await get(kept, ref, testOf(step, t)));
    expect(await get(cache, ref, testOf(step, t))).toMatchObject({ verdict: t % 3 === 0 ? 'wrong_answer' : 'accepted', timeMs: step * 10 + t });
  }
  expect(await get(cache, ref, testOf(steps + 1, 0))).toBeUndefined();
});
