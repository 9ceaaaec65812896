/** The Judge's index of recorded verdicts: once a snapshot saved its side rows, it keeps in memory
 * only what it folded since, and answers every earlier pair from the rows. */
import { expect, it } from 'vitest';
import { VerdictIndex, splitReused } from '../../src/actors/judge.js';
import { requestBody } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { sideTable } from '../support/side-table.js';
import { compactResults, type ResultFigures } from '../../src/events/program-executed.js';

const h = (n: number) => n.toString(16).padStart(64, '0');
/** An event as a fold sees it; positions in log order (results number their programs' side rows by them). */
let lastPosition = 0;
const event = (type: string, data: unknown) => ({ type, data, position: ++lastPosition }) as unknown as EventEnvelope;
const figures = (verdict: ResultFigures['verdict'], timeMs: number): ResultFigures => ({
  verdict,
  timeMs,
  memoryKb: 10,
  outputHash: null,
  exceptionType: null,
  isolated: true,
  cached: false,
});

function foldRound(index: VerdictIndex, round: number): void {
  for (let p = 0; p < 4; p++) {
    const programHash = h(round * 100 + p);
    const pairs = Array.from({ length: 8 }, (_, t) => ({ programId: `p${p}`, programHash, testId: `t${t}`, testHash: h(1_000_000 + round * 100 + t) }));
    const requestId = `${round}/x/${p}`;
    index.observe(event('ExecutionRequested', { round, problemId: 'x', requestId, purpose: 'reward', ...requestBody(pairs) }));
    index.observe(
      event(
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
    index.observe(event('ProblemEvaluated', { round, problemId: 'x' }));
  }
}

it('holds no verdict of past rounds in memory once a snapshot saved them, and answers them the same', () => {
  const saved = new VerdictIndex();
  const kept = new VerdictIndex();
  const table = sideTable();
  for (let round = 1; round <= 20; round++) {
    foldRound(saved, round);
    foldRound(kept, round);
    table.save(saved.sideRows());
    saved.sideSaved(table.reader());
    expect(saved.heldEntries).toBe(0);
  }
  // An index that never saved holds every verdict and load outcome of the run, and the first event
  // of each program (its number in the rows it would save): 20 x 4 x (8 + 1 + 1).
  expect(kept.heldEntries).toBe(20 * 4 * 10);
  expect(saved.recorded()).toEqual(kept.recorded());
  for (const round of [1, 20]) {
    expect(saved.has('x', h(round * 100 + 2), h(1_000_000 + round * 100 + 5))).toBe(true);
    expect(saved.load('x', h(round * 100 + 2))).toBe('ran');
  }
  expect(saved.has('x', h(2100), h(1_000_000))).toBe(false);

  // A program read from the rows and run again (a problem's reference, on a new test) answers
  // as one that kept everything, and holds nothing of it in memory once saved.
  const again = (index: VerdictIndex) => {
    const pairs = [{ programId: 'ref', programHash: h(2002), testId: 'new', testHash: h(7) }];
    index.observe(event('ExecutionRequested', { round: 21, problemId: 'x', requestId: '21/x/0', purpose: 'reward', ...requestBody(pairs) }));
    index.observe(event('ProgramExecuted', compactResults('21/x/0', h(2002), [0], [figures('time_limit', 99)], 'raised')));
  };
  again(saved);
  again(kept);
  table.save(saved.sideRows());
  saved.sideSaved(table.reader());
  expect(saved.heldEntries).toBe(0);
  expect(saved.has('x', h(2002), h(7))).toBe(true);
  expect(saved.has('x', h(2002), h(1_000_000 + 2000 + 5))).toBe(true);
  expect(saved.recorded()).toEqual(kept.recorded());
});

it("keeps memory bounded while a problem's reference is asked about every new test of the run, and answers its old pairs from the rows", () => {
  const saved = new VerdictIndex();
  const kept = new VerdictIndex();
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
    for (const p of pairs.slice(0, 16)) expect(saved.has('x', ref, p.testHash)).toBe(false);
    const requestId = `${step}/x/oracle`;
    const results = pairs.map((p, i) => (i < 16 ? verdictOf(step, i) : figures('time_limit', 1000 + i)));
    for (const index of [saved, kept]) {
      index.observe(event('ExecutionRequested', { round: step, problemId: 'x', requestId, purpose: 'oracle', ...requestBody(pairs) }));
      index.observe(
        event(
          'ProgramExecuted',
          compactResults(
            requestId,
            ref,
            pairs.map((_, i) => i),
            results,
            'ran',
          ),
        ),
      );
      index.observe(event('ProblemEvaluated', { round: step, problemId: 'x' }));
    }
    held.push(saved.heldEntries);
    table.save(saved.sideRows());
    saved.sideSaved(table.reader());
  }
  // What the index holds in a step is that step's work: the same at the last step as at the second.
  expect(Math.max(...held)).toBeLessThanOrEqual(16 + 4 + 2);
  // Every result of the reference, its load outcome and its first event.
  expect(kept.heldEntries).toBe(steps * 16 + 1 + 1);
  expect(saved.recorded()).toEqual(kept.recorded());
  // Old pairs answer exactly, from the rows: a request reusing them reads each one's latest verdict.
  const old = [testOf(1, 0), testOf(1, 5), testOf(7, 3), testOf(steps - 1, 15)];
  const reuse = (index: VerdictIndex) => {
    const pairs = old.map((testHash, t) => ({ programId: 'ref', programHash: ref, testId: `r${t}`, testHash }));
    index.observe(
      event('ExecutionRequested', { round: steps + 1, problemId: 'x', requestId: `${steps + 1}/x/oracle`, purpose: 'oracle', ...requestBody([], pairs) }),
    );
    return index.of(`${steps + 1}/x/oracle`);
  };
  const answers = reuse(saved);
  expect(answers.map((r) => [r.verdict, r.timeMs])).toEqual([
    ['time_limit', 1016],
    [verdictOf(1, 5).verdict, 15],
    [verdictOf(7, 3).verdict, 73],
    [verdictOf(steps - 1, 15).verdict, (steps - 1) * 10 + 15],
  ]);
  expect(answers).toEqual(reuse(kept));
  expect(saved.has('x', ref, testOf(steps + 1, 0))).toBe(false);
  expect(saved.has('y', ref, testOf(1, 0))).toBe(false);
});

it('splits a plan on one batched read of the rows, not a point read per pair', () => {
  const index = new VerdictIndex();
  const table = sideTable();
  const ref = h(42);
  foldRound(index, 1);
  const oracle = Array.from({ length: 16 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `t${t}`, testHash: h(9_000 + t) }));
  index.observe(event('ExecutionRequested', { round: 1, problemId: 'x', requestId: '1/x/oracle', purpose: 'oracle', ...requestBody(oracle) }));
  index.observe(
    event(
      'ProgramExecuted',
      compactResults(
        '1/x/oracle',
        ref,
        oracle.map((_, i) => i),
        oracle.map((_, t) => figures('accepted', t)),
        'ran',
      ),
    ),
  );
  table.save(index.sideRows());
  let gets = 0;
  let numbers = 0;
  let batches = 0;
  const reader = table.reader();
  // Point reads of pairs counted apart from lookups of a program's number ('i' rows).
  index.sideSaved({ ...reader, get: (key) => (key[0] === 0x69 ? numbers++ : gets++, reader.get(key)), getMany: (keys) => (batches++, reader.getMany(keys)) });
  // The reference on 4 tests it ran and 60 new ones, a fresh program on 8, an old program on its 8.
  const plan = [
    ...Array.from({ length: 64 }, (_, t) => ({ programId: 'ref', programHash: ref, testId: `k${t}`, testHash: h(t < 4 ? 9_000 + t : 8_000 + t) })),
    ...Array.from({ length: 8 }, (_, t) => ({ programId: 'new', programHash: h(7), testId: `n${t}`, testHash: h(8_000 + t) })),
    ...Array.from({ length: 8 }, (_, t) => ({ programId: 'p1', programHash: h(101), testId: `o${t}`, testHash: h(1_000_000 + 100 + t) })),
  ];
  const { pairs, reused } = splitReused('x', plan, index, new Set());
  expect(reused.map((p) => p.testId)).toEqual([...['k0', 'k1', 'k2', 'k3'], ...Array.from({ length: 8 }, (_, t) => `o${t}`)]);
  expect(pairs).toHaveLength(68);
  // One batch, no point read, each program's number looked up once.
  expect([batches, gets, numbers]).toEqual([1, 0, 3]);
});
