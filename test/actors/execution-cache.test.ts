/** The Executor's cache of recorded results: what it answers for a (program, test) pair, and
 * the same answers after a snapshot round trip (body and side rows). */
import { expect, it } from 'vitest';
import { ExecutionCache } from '../../src/actors/executor.js';
import { requestBody } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { sideTable } from '../support/side-table.js';
import { compactResults, type ResultFigures } from '../../src/events/program-executed.js';

const h = (n: number) => n.toString(16).padStart(64, '0');
/** An event as a fold sees it; positions in log order (results number their programs' side rows by them). */
let lastPosition = 0;
const event = (type: string, data: unknown) => ({ type, data, position: ++lastPosition }) as unknown as EventEnvelope;
const roundTrip = (cache: ExecutionCache, table: ReturnType<typeof sideTable>) => {
  table.save(cache.sideRows());
  cache.sideSaved();
  return ExecutionCache.restore(JSON.parse(JSON.stringify(cache.serialize())), table.reader());
};
const figures = (verdict: ResultFigures['verdict'], timeMs: number): ResultFigures => ({
  verdict,
  timeMs,
  memoryKb: 10,
  outputHash: null,
  exceptionType: null,
  isolated: true,
  cached: false,
});

it('answers each pair with its newest recorded result, never with a sandbox error, and the same after a snapshot', () => {
  const cache = new ExecutionCache();
  const pairs = [0, 1, 2].map((t) => ({ programId: 'p', programHash: h(1), testId: `t${t}`, testHash: h(100 + t) }));
  cache.observe(event('ExecutionRequested', { round: 1, problemId: 'x', requestId: 'r1', purpose: 'reward', ...requestBody(pairs) }));
  cache.observe(
    event('ProgramExecuted', compactResults('r1', h(1), [0, 1, 2], [figures('accepted', 1), figures('sandbox_error', 2), figures('wrong_answer', 3)], 'ran')),
  );
  // A later request runs test 0 again (a flaky first run, say): its result answers from now on.
  cache.observe(event('ExecutionRequested', { round: 2, problemId: 'x', requestId: 'r2', purpose: 'reward', ...requestBody([pairs[0]!]) }));
  cache.observe(event('ProgramExecuted', compactResults('r2', h(1), [0], [figures('time_limit', 9)], 'ran')));
  // Results of a request never announced name no pairs.
  cache.observe(event('ProgramExecuted', compactResults('r9', h(2), [0], [figures('accepted', 1)], 'raised')));

  const table = sideTable();
  for (const c of [cache, roundTrip(cache, table)]) {
    expect(c.get(h(1), h(100))).toMatchObject({ verdict: 'time_limit', timeMs: 9 });
    expect(c.get(h(1), h(101))).toBeUndefined();
    expect(c.get(h(1), h(102))).toMatchObject({ verdict: 'wrong_answer', timeMs: 3, isolated: true });
    expect(c.get(h(2), h(100))).toBeUndefined();
    expect(c.load(h(1))).toBe('ran');
    expect(c.load(h(2))).toBe('raised');
    expect(c.load(h(3))).toBe('unknown');
  }
});

it('a restored cache answers from the side rows and its own later records, and its body does not grow with the records', () => {
  const table = sideTable();
  const cache = new ExecutionCache();
  const request = (id: string, program: number, tests: number[]) => {
    const pairs = tests.map((t) => ({ programId: 'p', programHash: h(program), testId: `t${t}`, testHash: h(100 + t) }));
    cache.observe(event('ExecutionRequested', { round: 1, problemId: 'x', requestId: id, purpose: 'reward', ...requestBody(pairs) }));
  };
  request('r1', 1, [0, 1]);
  cache.observe(event('ProgramExecuted', compactResults('r1', h(1), [0, 1], [figures('accepted', 1), figures('wrong_answer', 2)], 'ran')));
  const body = JSON.stringify(cache.serialize());
  const restored = roundTrip(cache, table);
  // Every record went to a side row: the body holds the requests in flight and a counter.
  expect(JSON.stringify(restored.serialize())).toBe(body);
  expect(restored.recorded()).toEqual(cache.recorded());
  // Folded after the restore: a newer result of test 0, a new program, a worse load outcome.
  const after = restored as ExecutionCache;
  for (const c of [cache, after]) {
    const again = (e: EventEnvelope) => c.observe(e);
    const pairs = [0, 2].map((t) => ({ programId: 'p', programHash: h(t === 0 ? 1 : 2), testId: `t${t}`, testHash: h(100 + t) }));
    again(event('ExecutionRequested', { round: 2, problemId: 'x', requestId: 'r2', purpose: 'reward', ...requestBody(pairs) }));
    again(event('ProgramExecuted', compactResults('r2', h(1), [0], [figures('time_limit', 7)], 'raised')));
    again(event('ProgramExecuted', compactResults('r2', h(2), [1], [figures('accepted', 3)], 'ran')));
  }
  const newRows = after.sideRows();
  expect(newRows.replace).toBe(false);
  // Two results, two load outcomes, and the new program's number.
  expect(newRows.rows.map(([k]) => String.fromCharCode(k[0]!))).toEqual(['q', 'q', 'm', 'm', 'i']);
  for (const c of [cache, after]) {
    expect(c.get(h(1), h(100))).toMatchObject({ verdict: 'time_limit', timeMs: 7 });
    expect(c.get(h(1), h(101))).toMatchObject({ verdict: 'wrong_answer', timeMs: 2 });
    expect(c.get(h(2), h(102))).toMatchObject({ verdict: 'accepted', timeMs: 3 });
    expect(c.load(h(1))).toBe('raised');
    expect(c.load(h(2))).toBe('ran');
  }
  expect(roundTrip(after, table).recorded()).toEqual(cache.recorded());
});

it('once a snapshot saves its rows, the cache holds only what it folded since: memory stays bounded over rounds, answers unchanged', () => {
  const cache = new ExecutionCache();
  const table = sideTable();
  const held: number[] = [];
  for (let round = 1; round <= 20; round++) {
    // Each round's programs and tests are new, as in a run: 4 programs x 8 tests.
    for (let p = 0; p < 4; p++) {
      const programHash = h(round * 100 + p);
      const pairs = Array.from({ length: 8 }, (_, t) => ({ programId: `p${p}`, programHash, testId: `t${t}`, testHash: h(1_000_000 + round * 100 + t) }));
      const requestId = `r${round}/${p}`;
      cache.observe(event('ExecutionRequested', { round, problemId: 'x', requestId, purpose: 'reward', ...requestBody(pairs) }));
      cache.observe(
        event(
          'ProgramExecuted',
          compactResults(
            requestId,
            programHash,
            [0, 1, 2, 3, 4, 5, 6, 7],
            pairs.map((_, t) => figures('accepted', round * 10 + t)),
            'ran',
          ),
        ),
      );
    }
    // A snapshot every round: its rows saved, the cache reading them from the table from now on.
    table.save(cache.sideRows());
    cache.sideSaved(table.reader());
    held.push(cache.heldEntries);
  }
  // Nothing of past rounds stays in memory; without the table it would hold 20 x 4 records and loads.
  expect(Math.max(...held)).toBe(0);
  // Every round's results still answer, read from the saved rows.
  for (const round of [1, 10, 20]) {
    expect(cache.get(h(round * 100 + 3), h(1_000_000 + round * 100 + 7))).toMatchObject({ verdict: 'accepted', timeMs: round * 10 + 7 });
    expect(cache.load(h(round * 100 + 3))).toBe('ran');
  }
  expect(cache.get(h(2100), h(1_000_000))).toBeUndefined();
  // A program read from the rows and run again (a problem's reference, on new tests) answers as a
  // fresh read of the rows, and holds nothing of its results in memory once they are saved.
  const again = [{ programId: 'ref', programHash: h(2003), testId: 'new', testHash: h(1_000_000 + 2007) }];
  cache.observe(event('ExecutionRequested', { round: 21, problemId: 'x', requestId: 'r21/0', purpose: 'reward', ...requestBody(again) }));
  cache.observe(event('ProgramExecuted', compactResults('r21/0', h(2003), [0], [figures('time_limit', 999)], 'ran')));
  table.save(cache.sideRows());
  cache.sideSaved(table.reader());
  expect(cache.heldEntries).toBe(0);
  const fresh = ExecutionCache.restore(JSON.parse(JSON.stringify(cache.serialize())), table.reader());
  for (const c of [cache, fresh]) expect(c.get(h(2003), h(1_000_000 + 2007))).toMatchObject({ verdict: 'time_limit', timeMs: 999 });
  expect(cache.get(h(2003), h(1_000_000 + 2006))).toMatchObject({ verdict: 'accepted', timeMs: 206 });
  // Not asked about again before the next save: dropped.
  table.save(cache.sideRows());
  cache.sideSaved(table.reader());
  table.save(cache.sideRows());
  cache.sideSaved(table.reader());
  expect(cache.heldEntries).toBe(0);
});

it("keeps memory bounded while a problem's reference runs on every new test of the run, and answers its old pairs from the rows", () => {
  const cache = new ExecutionCache();
  const kept = new ExecutionCache();
  const table = sideTable();
  const ref = h(42);
  const testOf = (step: number, t: number) => h(5_000_000 + step * 100 + t);
  const held: number[] = [];
  const steps = 40;
  for (let step = 1; step <= steps; step++) {
    const pairs = Array.from({ length: 16 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `t${t}`, testHash: testOf(step, t) }));
    for (const p of pairs) expect(cache.get(ref, p.testHash)).toBeUndefined();
    // An earlier step's test is asked about (and answered) as a plan would.
    if (step > 1) expect(cache.get(ref, testOf(step - 1, 3))).toMatchObject({ timeMs: (step - 1) * 10 + 3 });
    for (const c of [cache, kept]) {
      c.observe(event('ExecutionRequested', { round: step, problemId: 'x', requestId: `r${step}`, purpose: 'oracle', ...requestBody(pairs) }));
      c.observe(
        event(
          'ProgramExecuted',
          compactResults(
            `r${step}`,
            ref,
            pairs.map((_, i) => i),
            pairs.map((_, t) => figures(t % 3 === 0 ? 'wrong_answer' : 'accepted', step * 10 + t)),
            'ran',
          ),
        ),
      );
    }
    held.push(cache.heldEntries);
    table.save(cache.sideRows());
    cache.sideSaved(table.reader());
  }
  // What the cache holds in a step is that step's work: the same at the last step as at the second.
  expect(Math.max(...held)).toBeLessThanOrEqual(16 + 2);
  // Every result of the reference, its load outcome and its first event.
  expect(kept.heldEntries).toBe(steps * 16 + 1 + 1);
  expect(cache.recorded()).toEqual(kept.recorded());
  for (const [step, t] of [
    [1, 0],
    [7, 3],
    [steps, 15],
  ] as const) {
    expect(cache.get(ref, testOf(step, t))).toEqual(kept.get(ref, testOf(step, t)));
    expect(cache.get(ref, testOf(step, t))).toMatchObject({ verdict: t % 3 === 0 ? 'wrong_answer' : 'accepted', timeMs: step * 10 + t });
  }
  expect(cache.get(ref, testOf(steps + 1, 0))).toBeUndefined();
});
