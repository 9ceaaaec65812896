/** The Judge's index of recorded verdicts: it keeps where each program's verdicts are in the log
 * (a row per program once a snapshot saved it, none of it in memory after), and answers every
 * earlier pair by reading the log there. */
import { expect, it } from 'vitest';
import { VerdictIndex, splitReused } from '../../src/actors/judge.js';
import { requestBody } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import type { ReadAt } from '../../src/events/read-at.js';
import { sideTable } from '../support/side-table.js';
import { figures, foldingLog, h } from '../support/folding-log.js';
import { compactResults } from '../../src/events/program-executed.js';

const has = async (index: VerdictIndex, problemId: string, program: string, test: string) =>
  (await index.resultsOf(problemId, [{ programHash: program, testHash: test }])).has(program, test);

type Event = (type: string, data: unknown) => Promise<EventEnvelope>;

async function roundEvents(event: Event, round: number): Promise<EventEnvelope[]> {
  const out: EventEnvelope[] = [];
  for (let p = 0; p < 4; p++) {
    const programHash = h(round * 100 + p);
    const pairs = Array.from({ length: 8 }, (_, t) => ({ programId: `p${p}`, programHash, testId: `t${t}`, testHash: h(1_000_000 + round * 100 + t) }));
    const requestId = `${round}/x/${p}`;
    out.push(await event('ExecutionRequested', { round, problemId: 'x', requestId, purpose: 'reward', ...requestBody(pairs) }));
    out.push(
      await event(
        'ProgramExecuted',
        compactResults(
          requestId,
          programHash,
          [0, 1, 2, 3, 4, 5, 6, 7],
          pairs.map((_, t) => figures(t % 2 === 0 ? 'accepted' : 'wrong_answer', t)),
          'ran',
        ),
      ),
    );
  }
  out.push(await event('ProblemEvaluated', { round, problemId: 'x', ...EVALUATED }));
  return out;
}
const EVALUATED = {
  heldOut: { programs: 0, passed: 0 },
  kill: { targets: 0, suites: 0, killed: 0 },
  tests: { sampled: 0, wellFormed: 0, valid: 0 },
  mistakeBook: { size: 0 },
  rewards: { code: 0, test: 0 },
};

it('holds nothing of past rounds in memory once a snapshot saved them, and answers them the same', async () => {
  const { event, read } = foldingLog();
  const saved = new VerdictIndex(null, read);
  const kept = new VerdictIndex(null, read);
  const table = sideTable();
  for (let round = 1; round <= 20; round++) {
    for (const e of await roundEvents(event, round)) for (const index of [saved, kept]) index.observe(e);
    table.save(saved.sideRows());
    saved.sideSaved(table.reader());
    expect(saved.heldEntries).toBe(0);
  }
  // An index that never saved holds an entry per program of the run (where its verdicts are), not one per verdict.
  expect(kept.heldEntries).toBe(20 * 4);
  expect(saved.recorded()).toEqual(kept.recorded());
  for (const round of [1, 20]) {
    expect(await has(saved, 'x', h(round * 100 + 2), h(1_000_000 + round * 100 + 5))).toBe(true);
    expect(saved.load('x', h(round * 100 + 2))).toBe('ran');
  }
  expect(await has(saved, 'x', h(2100), h(1_000_000))).toBe(false);
  // Problems are apart: the same program in another problem has no verdicts.
  expect(await has(saved, 'y', h(2002), h(1_000_000 + 2000 + 5))).toBe(false);

  // A program read from the rows and run again (a problem's reference, on a new test) answers
  // as one that kept everything, and holds nothing of it in memory once saved.
  const pairs = [{ programId: 'ref', programHash: h(2002), testId: 'new', testHash: h(7) }];
  const again = [
    await event('ExecutionRequested', { round: 21, problemId: 'x', requestId: '21/x/0', purpose: 'reward', ...requestBody(pairs) }),
    await event('ProgramExecuted', compactResults('21/x/0', h(2002), [0], [figures('time_limit', 99)], 'raised')),
  ];
  for (const e of again) for (const index of [saved, kept]) index.observe(e);
  table.save(saved.sideRows());
  saved.sideSaved(table.reader());
  expect(saved.heldEntries).toBe(0);
  expect(await has(saved, 'x', h(2002), h(7))).toBe(true);
  expect(await has(saved, 'x', h(2002), h(1_000_000 + 2000 + 5))).toBe(true);
  expect(saved.load('x', h(2002))).toBe('raised');
  expect(saved.recorded()).toEqual(kept.recorded());
});

it("answers a problem's reference's old pairs from the log, its latest verdict each, as a request reusing them reads them", async () => {
  const { event, read } = foldingLog();
  const saved = new VerdictIndex(null, read);
  const kept = new VerdictIndex(null, read);
  const table = sideTable();
  const ref = h(42);
  const testOf = (step: number, t: number) => h(5_000_000 + step * 100 + t);
  const verdictOf = (step: number, t: number) => figures((step + t) % 3 === 0 ? 'wrong_answer' : 'accepted', step * 10 + t);
  const held: number[] = [];
  const steps = 40;
  for (let step = 1; step <= steps; step++) {
    // The oracle asks about the reference on this step's tests (new: none recorded), then records them;
    // the last step also runs it again on the first step's tests, with other verdicts.
    const pairs = Array.from({ length: 16 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `t${step}.${t}`, testHash: testOf(step, t) }));
    if (step === steps)
      pairs.push(...Array.from({ length: 4 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `again${t}`, testHash: testOf(1, t) })));
    const recorded = await saved.resultsOf('x', pairs);
    for (const p of pairs.slice(0, 16)) expect(recorded.has(ref, p.testHash)).toBe(false);
    const requestId = `${step}/x/oracle`;
    const results = pairs.map((p, i) => (i < 16 ? verdictOf(step, i) : figures('time_limit', 1000 + i)));
    const folded = [
      await event('ExecutionRequested', { round: step, problemId: 'x', requestId, purpose: 'oracle', ...requestBody(pairs) }),
      await event(
        'ProgramExecuted',
        compactResults(
          requestId,
          ref,
          pairs.map((_, i) => i),
          results,
          'ran',
        ),
      ),
      await event('ProblemEvaluated', { round: step, problemId: 'x', ...EVALUATED }),
    ];
    for (const e of folded) for (const index of [saved, kept]) index.observe(e);
    held.push(saved.heldEntries);
    table.save(saved.sideRows());
    saved.sideSaved(table.reader());
  }
  // What the index holds in a step is the one program it was asked about, at the last step as at the second.
  expect(Math.max(...held)).toBe(1);
  expect(kept.heldEntries).toBe(1);
  expect(saved.recorded()).toEqual(kept.recorded());
  // Old pairs answer exactly: a request reusing them reads each one's latest verdict.
  const old = [testOf(1, 0), testOf(1, 5), testOf(7, 3), testOf(steps - 1, 15)];
  const reusing = await event('ExecutionRequested', {
    round: steps + 1,
    problemId: 'x',
    requestId: `${steps + 1}/x/oracle`,
    purpose: 'oracle',
    ...requestBody(
      [],
      old.map((testHash, t) => ({ programId: 'ref', programHash: ref, testId: `r${t}`, testHash })),
    ),
  });
  const reuse = async (index: VerdictIndex) => {
    index.observe(reusing);
    return (await index.verdictsOf(`${steps + 1}/x`))(`${steps + 1}/x/oracle`);
  };
  const answers = await reuse(saved);
  expect(answers.map((r) => [r.verdict, r.timeMs, r.cached])).toEqual([
    ['time_limit', 1016, true],
    [verdictOf(1, 5).verdict, 15, true],
    [verdictOf(7, 3).verdict, 73, true],
    [verdictOf(steps - 1, 15).verdict, (steps - 1) * 10 + 15, true],
  ]);
  expect(answers).toEqual(await reuse(kept));
  expect(await has(saved, 'x', ref, testOf(steps + 1, 0))).toBe(false);
  expect(await has(saved, 'y', ref, testOf(1, 0))).toBe(false);
});

it('splits a plan reading the log only at the events of the pairs it reuses: a fresh sample, or an old program on new tests, reads nothing', async () => {
  const { event, read } = foldingLog();
  const positionsRead: number[] = [];
  const counting: ReadAt = (positions) => (positionsRead.push(...positions), read(positions));
  const index = new VerdictIndex(null, counting);
  const ref = h(42);
  for (const e of await roundEvents(event, 1)) index.observe(e);
  const oracle = Array.from({ length: 16 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `t${t}`, testHash: h(9_000 + t) }));
  index.observe(await event('ExecutionRequested', { round: 2, problemId: 'x', requestId: '2/x/oracle', purpose: 'oracle', ...requestBody(oracle) }));
  index.observe(
    await event(
      'ProgramExecuted',
      compactResults(
        '2/x/oracle',
        ref,
        oracle.map((_, i) => i),
        oracle.map((_, t) => figures('accepted', t)),
        'ran',
      ),
    ),
  );
  // The reference on 4 tests it ran and 60 new ones, a fresh program on 8, an old program on its 8.
  const plan = [
    ...Array.from({ length: 64 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `k${t}`, testHash: h(t < 4 ? 9_000 + t : 8_000 + t) })),
    ...Array.from({ length: 8 }, (_, t) => ({ programId: 'new', programHash: h(7), testId: `n${t}`, testHash: h(8_000 + t) })),
    ...Array.from({ length: 8 }, (_, t) => ({ programId: 'p1', programHash: h(101), testId: `o${t}`, testHash: h(1_000_000 + 100 + t) })),
  ];
  const { pairs, reused } = splitReused('x', plan, await index.resultsOf('x', plan), new Set());
  expect(reused.map((p) => p.testId)).toEqual([...['k0', 'k1', 'k2', 'k3'], ...Array.from({ length: 8 }, (_, t) => `o${t}`)]);
  expect(pairs).toHaveLength(68);
  // One read of four events: each old program's results and the request naming them; nothing for the fresh one.
  expect(positionsRead).toHaveLength(4);
  expect(positionsRead).toEqual([...positionsRead].sort((a, b) => a - b));
  // The reference on new tests only: answered from the index, nothing read.
  positionsRead.length = 0;
  const fresh = plan.slice(4, 64);
  expect(splitReused('x', fresh, await index.resultsOf('x', fresh), new Set()).reused).toEqual([]);
  expect(positionsRead).toEqual([]);
});
