/**
 * Answer selection on hand-made candidates and on a hand-made event sequence: the selectors,
 * their tie-breaks, the exact random-pick expectation, and verdicts reused across rounds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openMemoryLog } from '../../src/events/memory/memory-log.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { answerSelectionProjection, readProblemSelections } from '../../src/projections/answer-selection-rows.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { makeEvent, requestBody, type EventDataInput, type EventType } from '../../src/events/catalog.js';
import {
  emptyAnswerSelection,
  reduceAnswerSelection,
  roundSelections,
  scoreCandidates,
  selectAnswer,
  selectForProblem,
  type AnswerSelectionState,
  type CandidateScore,
} from '../../src/projections/answer-selection.js';
import { emptyRecordedVerdicts, observeVerdicts, verdictsOf } from '../../src/projections/recorded-verdicts.js';

function cand(solutionId: string, index: number, gen: [number, number], book: [number, number], passes: boolean): CandidateScore {
  return {
    solutionId,
    index,
    programHash: 'p'.repeat(64),
    generated: { passed: gen[0], run: gen[1] },
    book: { passed: book[0], run: book[1] },
    heldOut: { passed: passes ? 3 : 1, run: 3 },
    passesHeldOut: passes,
  };
}

describe('selectors', () => {
  it('rank by pass rate, not raw count: 2/2 beats 6/8', () => {
    const picked = selectAnswer([cand('a', 0, [6, 8], [0, 0], false), cand('b', 1, [2, 2], [0, 0], true)], 'generated');
    expect(picked?.solutionId).toBe('b');
  });

  it('break equal rates by tests passed, then Mistake Book passes, then the earlier sample', () => {
    expect(selectAnswer([cand('a', 0, [3, 4], [0, 0], false), cand('b', 1, [6, 8], [0, 0], true)], 'generated')?.solutionId).toBe('b');
    expect(selectAnswer([cand('a', 0, [3, 4], [0, 2], false), cand('b', 1, [3, 4], [1, 2], true)], 'generated')?.solutionId).toBe('b');
    expect(selectAnswer([cand('b', 1, [3, 4], [1, 2], true), cand('a', 0, [3, 4], [1, 2], false)], 'generated')?.solutionId).toBe('a');
    // A program that ran no test has rate 0, below any pass.
    expect(selectAnswer([cand('a', 0, [0, 0], [0, 0], false), cand('b', 1, [1, 5], [0, 0], true)], 'generated')?.solutionId).toBe('b');
  });

  it('with-book pools generated and Mistake Book tests', () => {
    // a: 4/4 generated, 0/3 book = 4/7; b: 3/4 generated, 3/3 book = 6/7.
    const cs = [cand('a', 0, [4, 4], [0, 3], false), cand('b', 1, [3, 4], [3, 3], true)];
    expect(selectAnswer(cs, 'generated')?.solutionId).toBe('a');
    expect(selectAnswer(cs, 'with-book')?.solutionId).toBe('b');
    const sel = selectForProblem(2, 'p', [...cs, cand('c', 2, [0, 4], [0, 3], false)]);
    expect(sel).toMatchObject({ candidates: 3, passing: 1, generatedPass: false, withBookPass: true, oraclePass: true });
    expect(sel.randomPass).toBe(1 / 3);
  });

  it('averages problems per round', () => {
    const a = selectForProblem(1, 'a', [cand('x', 0, [1, 1], [0, 0], true), cand('y', 1, [0, 1], [0, 0], false)]);
    const b = selectForProblem(1, 'b', [
      cand('x', 0, [1, 1], [0, 0], false),
      cand('y', 1, [0, 1], [0, 0], false),
      cand('z', 2, [0, 1], [0, 0], false),
      cand('w', 3, [0, 1], [0, 0], true),
    ]);
    expect(roundSelections([a, b])).toEqual([{ round: 1, problems: 2, generated: 0.5, withBook: 0.5, random: (1 / 2 + 1 / 4) / 2, oracle: 1 }]);
  });

  it('a selector with no test to read has no figure (null), not 0', () => {
    // The golden-tests baseline: no generated or Mistake Book test ran in the round.
    const g = selectForProblem(1, 'a', [cand('x', 0, [0, 0], [0, 0], true), cand('y', 1, [0, 0], [0, 0], false)]);
    expect(roundSelections([g])).toEqual([{ round: 1, problems: 1, generated: null, withBook: null, random: 0.5, oracle: 1 }]);
  });

  it("the dataset's own tests (CURE's ground truth) count neither as generated nor as Mistake Book tests", () => {
    const scores = scoreCandidates({
      candidates: [{ solutionId: 's0', programHash: H('a'), index: 0 }],
      generatedTests: new Set(['suite/0']),
      reward: [
        { programId: 's0', programHash: H('a'), testId: 'suite/0', testHash: H('c'), verdict: 'accepted', reused: false },
        { programId: 's0', programHash: H('a'), testId: 'gt/0', testHash: H('d'), verdict: 'accepted', reused: false },
        { programId: 's0', programHash: H('a'), testId: 'mistake-book/k', testHash: H('e'), verdict: 'wrong_answer', reused: false },
        // EvolveCoder's evolved tests are generated tests too.
        { programId: 's0', programHash: H('a'), testId: 'evolved/0123456789abcdef', testHash: H('f'), verdict: 'wrong_answer', reused: false },
      ],
      heldOut: [],
    });
    expect([scores[0]!.generated, scores[0]!.book]).toEqual([
      { passed: 1, run: 2 },
      { passed: 0, run: 1 },
    ]);
  });
});

const H = (c: string) => c.repeat(64);
let position = 0;
function ev<T extends EventType>(type: T, data: EventDataInput<T>): EventEnvelope {
  const e = makeEvent(type, 'run', data);
  position++;
  return {
    ...e,
    id: `e${position}`,
    stream: 'test',
    position,
    at: '2026-01-01T00:00:00.000Z',
    causationId: null,
    correlationId: null,
    v: 1,
  } as unknown as EventEnvelope;
}
const policy = { role: 'code' as const, name: 'catalog', version: 0 };
const sampledData = (round: number, id: string, index: number, programHash: string, problemId = 'p'): EventDataInput<'SolutionSampled'> => ({
  round,
  problemId,
  solutionId: id,
  programHash,
  policy,
  sampling: { seed: 1, index, temperature: null, candidateId: null, contextKey: null },
  responseHash: null,
});
const solution = (round: number, id: string, index: number, programHash: string) => ev('SolutionSampled', sampledData(round, id, index, programHash));
const pair = (programId: string, programHash: string, testId: string, testHash: string) => ({ programId, programHash, testId, testHash });
const done = (requestId: string, p: ReturnType<typeof pair>, verdict: 'accepted' | 'wrong_answer' | 'sandbox_error') =>
  ev('ExecutionCompleted', { requestId, ...p, verdict, timeMs: 1, memoryKb: 1, outputHash: null, exceptionType: null, isolated: true, cached: false });
const judged = (round: number, testIds: [string, string, boolean][]) =>
  ev('TestsJudged', {
    round,
    problemId: 'p',
    tests: testIds.map(([testId, testHash, ok]) => ({
      testId,
      testHash,
      valid: ok,
      reason: ok ? ('ok' as const) : ('malformed' as const),
      status: ok ? ('valid' as const) : ('invalid' as const),
      oracleHash: ok ? testHash : null,
    })),
  });
const evaluatedData = (round: number, problemId = 'p', candidates?: EventDataInput<'ProblemEvaluated'>['candidates']): EventDataInput<'ProblemEvaluated'> => ({
  round,
  problemId,
  heldOut: { programs: 2, passed: 0 },
  kill: { targets: 0, suites: 0, killed: 0 },
  tests: { sampled: 0, wellFormed: 0, valid: 0 },
  mistakeBook: { size: 0 },
  rewards: { code: 0, test: 0 },
  ...(candidates ? { candidates } : {}),
});
const evaluated = (round: number) => ev('ProblemEvaluated', evaluatedData(round));
const request = (round: number, purpose: 'reward' | 'heldout', pairs: ReturnType<typeof pair>[], reused: ReturnType<typeof pair>[] = []) =>
  ev('ExecutionRequested', { round, problemId: 'p', requestId: `${round}/p/${purpose}`, purpose, ...requestBody(pairs, reused) });

describe('the answer-selection reducer', () => {
  // Programs P0 (sampled as s0 in round 1, s1 in round 2) and P1; generated test G, Mistake Book test B, held-out test O.
  const P0 = H('a');
  const P1 = H('b');
  const G = H('c');
  const B = H('d');
  const O = H('e');
  const r1 = [
    pair('1/p/s0', P0, 'suite0/0', G),
    pair('1/p/s1', P1, 'suite0/0', G),
    pair('1/p/s0', P0, 'mistake-book/k', B),
    pair('1/p/s1', P1, 'mistake-book/k', B),
    pair('reference', H('f'), 'mistake-book/k', B),
  ];
  const h1 = [pair('1/p/s0', P0, 'heldout/0', O), pair('1/p/s1', P1, 'heldout/0', O)];
  const events: EventEnvelope[] = [
    solution(1, '1/p/s0', 0, P0),
    solution(1, '1/p/s1', 1, P1),
    judged(1, [
      ['suite0/0', G, true],
      ['suite0/1', H('9'), false],
    ]),
    request(1, 'reward', r1),
    request(1, 'heldout', h1),
    done('1/p/reward', r1[0]!, 'accepted'),
    done('1/p/reward', r1[1]!, 'wrong_answer'),
    done('1/p/reward', r1[2]!, 'wrong_answer'),
    done('1/p/reward', r1[3]!, 'accepted'),
    done('1/p/reward', r1[4]!, 'accepted'),
    done('1/p/heldout', h1[0]!, 'accepted'),
    done('1/p/heldout', h1[1]!, 'wrong_answer'),
    evaluated(1),
    // Round 2: the same two programs, sampled in the other order; every pair is reused but one,
    // whose execution is a sandbox error (counted as run, not passed; never reused).
    solution(2, '2/p/s0', 0, P1),
    solution(2, '2/p/s1', 1, P0),
    judged(2, [
      ['suite1/0', G, true],
      ['suite1/1', H('8'), true],
    ]),
    request(
      2,
      'reward',
      [pair('2/p/s0', P1, 'suite1/1', H('8'))],
      [pair('2/p/s0', P1, 'suite1/0', G), pair('2/p/s1', P0, 'suite1/0', G), pair('2/p/s1', P0, 'mistake-book/k', B)],
    ),
    request(2, 'heldout', [], [pair('2/p/s0', P1, 'heldout/0', O), pair('2/p/s1', P0, 'heldout/0', O)]),
    done('2/p/reward', pair('2/p/s0', P1, 'suite1/1', H('8')), 'sandbox_error'),
    evaluated(2),
  ];
  const state = events.reduce<AnswerSelectionState>(reduceAnswerSelection, emptyAnswerSelection());

  it('scores round 1 from executed verdicts; the reference is no candidate', () => {
    const r = state.problems[0]!;
    expect(r.scores.map((s) => [s.solutionId, s.generated, s.book, s.passesHeldOut])).toEqual([
      ['1/p/s0', { passed: 1, run: 1 }, { passed: 0, run: 1 }, true],
      ['1/p/s1', { passed: 0, run: 1 }, { passed: 1, run: 1 }, false],
    ]);
    // generated: s0 (1/1). with-book: 1/2 each, 1 passed each, s1 passed more Mistake Book tests.
    expect(r).toMatchObject({
      selectedGenerated: '1/p/s0',
      generatedPass: true,
      selectedWithBook: '1/p/s1',
      withBookPass: false,
      randomPass: 0.5,
      oraclePass: true,
    });
  });

  it('scores round 2 from reused verdicts, matched by program and test hash', () => {
    const r = state.problems[1]!;
    expect(r.scores.map((s) => [s.solutionId, s.generated, s.book, s.heldOut])).toEqual([
      ['2/p/s0', { passed: 0, run: 2 }, { passed: 0, run: 0 }, { passed: 0, run: 1 }],
      ['2/p/s1', { passed: 1, run: 1 }, { passed: 0, run: 1 }, { passed: 1, run: 1 }],
    ]);
    expect(r).toMatchObject({ selectedGenerated: '2/p/s1', generatedPass: true, randomPass: 0.5 });
    // Per-request lists are dropped once a problem-round is evaluated.
    expect(Object.values(state.verdicts.open).flatMap((shard) => Object.keys(shard))).toEqual([]);
    expect(Object.keys(state.open)).toEqual([]);
  });

  it('never reuses a sandbox error and never mutates the state it is given', () => {
    let v = emptyRecordedVerdicts();
    const req = request(3, 'reward', [pair('x', P0, 't', H('7'))]);
    v = observeVerdicts(v, req, () => true);
    const before = JSON.stringify(v);
    const after = observeVerdicts(v, done('3/p/reward', pair('x', P0, 't', H('7')), 'sandbox_error'), () => true);
    expect(JSON.stringify(v)).toBe(before);
    expect(verdictsOf(after, '3/p/reward').map((x) => x.verdict)).toEqual(['sandbox_error']);
    const later = observeVerdicts(after, request(4, 'reward', [], [pair('y', P0, 't', H('7'))]), () => true);
    expect(verdictsOf(later, '4/p/reward')).toEqual([]);
  });
});

describe('answer selection from the tallies the Judge records', () => {
  const P0 = H('a');
  const P1 = H('b');
  const tallied = (round: number, problemId: string, candidates: EventDataInput<'ProblemEvaluated'>['candidates']) =>
    makeEvent('ProblemEvaluated', 'run', evaluatedData(round, problemId, candidates));
  const sampled = (round: number, problemId: string, id: string, index: number, programHash: string) =>
    makeEvent('SolutionSampled', 'run', sampledData(round, id, index, programHash, problemId));

  it('refuses malformed tallies, naming the field', () => {
    expect(() => tallied(1, 'p', [{ solutionId: '1/p/s0', generated: [-1, 2], book: [0, 0], heldOut: [0, 0] }])).toThrow(
      /malformed: data\.candidates\[0\]\.generated\[0\]: Too small/,
    );
    expect(() => tallied(1, 'p', [{ solutionId: '', generated: [0, 0], book: [0, 0], heldOut: [0, 0] }])).toThrow(
      /malformed: data\.candidates\[0\]\.solutionId/,
    );
  });

  it('scores each candidate by its recorded tallies (a candidate without one has none) and refuses a later problem-round without them', async () => {
    const log = openMemoryLog();
    await log.append('s', [sampled(1, 'p', '1/p/s0', 0, P0), sampled(1, 'p', '1/p/s1', 1, P1)], { commitId: 'c1' });
    // s1 passes more generated tests; s0 passes every held-out test; s1 has no tallies at all.
    await log.append('s', [tallied(1, 'p', [{ solutionId: '1/p/s0', generated: [1, 2], book: [0, 0], heldOut: [3, 3] }])], { commitId: 'c2' });
    const dir = mkdtempSync(join(tmpdir(), 'answer-selection-'));
    try {
      const runner = await ProjectionRunner.replayInto(join(dir, 'views.db'), { log, projections: [answerSelectionProjection] });
      const [row] = readProblemSelections(runner.readModel.db);
      expect(row).toMatchObject({ candidates: 2, passing: 1, selectedGenerated: '1/p/s0', generatedPass: true, randomPass: 0.5, oraclePass: true });
      expect(row!.scores.map((c) => [c.solutionId, c.generated, c.book, c.heldOut, c.passesHeldOut])).toEqual([
        ['1/p/s0', { passed: 1, run: 2 }, { passed: 0, run: 0 }, { passed: 3, run: 3 }, true],
        ['1/p/s1', { passed: 0, run: 0 }, { passed: 0, run: 0 }, { passed: 0, run: 0 }, false],
      ]);
      // A later problem-round without tallies cannot be counted: its requests were not read.
      await log.append('s', [sampled(2, 'q', '2/q/s0', 0, P0), tallied(2, 'q', undefined)], { commitId: 'c3' });
      await expect(runner.catchUp()).rejects.toThrow(
        /ProblemEvaluated of 2\/q at position \d+ carries no candidates' tallies, though this log's first one did/,
      );
      await runner.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await log.close();
    }
  });
});
