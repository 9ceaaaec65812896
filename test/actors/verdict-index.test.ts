/** The Judge's index of recorded verdicts: once a snapshot saved its side rows, it keeps in memory
 * only what it folded since, and answers every earlier pair from the rows. */
import { expect, it } from 'vitest';
import { VerdictIndex } from '../../src/actors/judge.js';
import { requestBody } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { sideTable } from '../support/side-table.js';
import { compactResults, type ResultFigures } from '../../src/projections/recorded-verdicts.js';

const h = (n: number) => n.toString(16).padStart(64, '0');
const event = (type: string, data: unknown) => ({ type, data }) as unknown as EventEnvelope;
const figures = (verdict: ResultFigures['verdict'], timeMs: number): ResultFigures => ({ verdict, timeMs, memoryKb: 10, outputHash: null, exceptionType: null, isolated: true, cached: false });

function foldRound(index: VerdictIndex, round: number): void {
  for (let p = 0; p < 4; p++) {
    const programHash = h(round * 100 + p);
    const pairs = Array.from({ length: 8 }, (_, t) => ({ programId: `p${p}`, programHash, testId: `t${t}`, testHash: h(1_000_000 + round * 100 + t) }));
    const requestId = `${round}/x/${p}`;
    index.observe(event('ExecutionRequested', { round, problemId: 'x', requestId, purpose: 'reward', ...requestBody(pairs) }));
    index.observe(event('ProgramExecuted', compactResults(requestId, programHash, [0, 1, 2, 3, 4, 5, 6, 7], pairs.map((_, t) => figures(t % 2 === 0 ? 'accepted' : 'wrong_answer', t)), 'ran')));
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
  // An index that never saved holds every verdict and load outcome of the run: 20 x 4 x (8 + 1).
  expect(kept.heldEntries).toBe(20 * 4 * 9);
  expect(saved.recorded()).toEqual(kept.recorded());
  for (const round of [1, 20]) {
    expect(saved.has('x', h(round * 100 + 2), h(1_000_000 + round * 100 + 5))).toBe(true);
    expect(saved.load('x', h(round * 100 + 2))).toBe('ran');
  }
  expect(saved.has('x', h(2100), h(1_000_000))).toBe(false);

  // A program read from the rows and run again (a problem's reference, on a new test) keeps its
  // verdicts across the save, with the new one added: it answers as one that kept everything.
  const again = (index: VerdictIndex) => {
    const pairs = [{ programId: 'ref', programHash: h(2002), testId: 'new', testHash: h(7) }];
    index.observe(event('ExecutionRequested', { round: 21, problemId: 'x', requestId: '21/x/0', purpose: 'reward', ...requestBody(pairs) }));
    index.observe(event('ProgramExecuted', compactResults('21/x/0', h(2002), [0], [figures('time_limit', 99)], 'raised')));
  };
  again(saved);
  again(kept);
  table.save(saved.sideRows());
  saved.sideSaved(table.reader());
  expect(saved.heldEntries).toBeGreaterThan(0);
  expect(saved.has('x', h(2002), h(7))).toBe(true);
  expect(saved.recorded()).toEqual(kept.recorded());
  // Not asked about again before the next save: dropped.
  for (let i = 0; i < 2; i++) {
    table.save(saved.sideRows());
    saved.sideSaved(table.reader());
  }
  expect(saved.heldEntries).toBe(0);
});
