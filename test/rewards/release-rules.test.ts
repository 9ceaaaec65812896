/**
 * The rules read from the released code of Code-A1, CURE and EvolveCoder (METHODS.md), each on a
 * hand-made matrix or book.
 */
import { describe, expect, it } from 'vitest';
import { codeA1CodeSelection, codeA1HasExpected, codeA1InvalidCount, codeA1JudgeTests, codeA1ProgramValid, codeA1Rewards } from '../../src/rewards/code-a1.js';
import { moduleLoadOf, moduleLoadOfResults } from '../../src/core/module-load.js';
import { inferProgramValid, parseMatrix, verdictsFromCodes } from '../../src/rewards/matrix.js';
import { applyMistakeBookChanges, emptyMistakeBook, topTests, updateMistakeBook } from '../../src/rewards/mistake-book.js';
import { cureAdvantages, cureRewards } from '../../src/rewards/cure.js';
import { finalFilter, reduceRedundancy, selectForAugmentation, selectSimilarPrograms } from '../../src/rewards/evolvecoder.js';
import { Rng } from '../../src/core/rng.js';

const tests = (n: number, suite = 's') => Array.from({ length: n }, (_, i) => ({ id: `t${i}`, suite }));

describe('Code-A1: a valid program is one whose module body ran to the end', () => {
  // p0's top level raises: every test is a runtime_error, and the load probe raised too.
  const m = parseMatrix({ programs: [{ id: 'p0' }, { id: 'p1' }], tests: tests(2), verdicts: verdictsFromCodes(['RR', 'AW']) });

  it('a program whose top level raises is invalid (compile errors are not the only way)', () => {
    expect(inferProgramValid(m, 0)).toBe(true); // what the rows alone say: no compile_error
    expect(moduleLoadOf('runtime_error')).toBe('raised');
    expect(codeA1ProgramValid(moduleLoadOf('runtime_error'), ['runtime_error', 'runtime_error'])).toBe(false);
    expect(codeA1ProgramValid(moduleLoadOf('accepted'), ['accepted', 'wrong_answer'])).toBe(true);
    expect(codeA1ProgramValid(moduleLoadOf('compile_error'), ['compile_error'])).toBe(false);
    // Without a probe: the sandbox's failure phase tells whether the module body ran.
    expect(
      moduleLoadOfResults([
        { verdict: 'runtime_error', phase: 'load' },
        { verdict: 'runtime_error', phase: 'load' },
      ]),
    ).toBe('raised');
    expect(moduleLoadOfResults([{ verdict: 'compile_error', phase: 'load' }])).toBe('compile_error');
    expect(moduleLoadOfResults([{ verdict: 'time_limit', phase: 'load' }])).toBe('raised');
    expect(moduleLoadOfResults([{ verdict: 'sandbox_error' }, { verdict: 'wrong_answer', phase: 'test' }])).toBe('ran');
    expect(moduleLoadOfResults([{ verdict: 'accepted' }])).toBe('ran');
    expect(moduleLoadOfResults([{ verdict: 'sandbox_error' }])).toBe('unknown');
    expect(moduleLoadOfResults([])).toBe('unknown');
    // Probe not run (a stdio program, whose body is the test) or lost to the sandbox: the rows decide.
    expect(codeA1ProgramValid('unknown', ['runtime_error'])).toBe(true);
    expect(codeA1ProgramValid('unknown', ['compile_error'])).toBe(false);
  });

  it('its suites earn no validity or attack reward', () => {
    const valid = [false, true];
    const r = codeA1Rewards({
      matrix: parseMatrix({ ...m, programs: m.programs.map((p, i) => ({ ...p, valid: valid[i] })) }),
      suites: [{ id: 's', program: 'p0', invalidCount: 0, nonprintableRatio: 0 }],
    });
    expect(r.programs[0]!.programValid).toBe(false);
    expect(r.programs[0]!.suites[0]!.rTest).toBe(0);
  });
});

describe('Code-A1 test judgement', () => {
  it('a test without an expected value is invalid, whatever the reference does', () => {
    expect(codeA1HasExpected({ style: 'call', args: [1] })).toBe(false);
    expect(codeA1HasExpected({ style: 'call', args: [1], expected: null })).toBe(true);
    expect(codeA1HasExpected({ style: 'stdio', input: '1\n', output: null })).toBe(false);
    expect(codeA1HasExpected({ style: 'stdio', input: '1\n', output: '2\n' })).toBe(true);
    expect(codeA1HasExpected({ style: 'assert', code: 'assert f(1)' })).toBe(false);
    expect(codeA1HasExpected({ style: 'assert', code: 'assert f(1) == 2' })).toBe(true);
    const judged = codeA1JudgeTests([
      { id: 'a', suite: 's', wellFormed: true, hasExpected: false, reference: 'accepted', correctedKey: 'k-a' },
      { id: 'b', suite: 's', wellFormed: true, hasExpected: true, reference: 'accepted', correctedKey: 'k-b' },
    ]);
    expect(judged.map((t) => [t.id, t.status, t.reason])).toEqual([
      ['a', 'invalid', 'no-expected'],
      ['b', 'valid', 'ok'],
    ]);
  });

  it('duplicates are removed on the GT-corrected statement, after the oracle, per suite', () => {
    // b and c state two outputs for one input: GT corrects both to one statement.
    const judged = codeA1JudgeTests([
      { id: 'a', suite: 's1', wellFormed: true, hasExpected: true, reference: 'accepted', correctedKey: 'k1' },
      { id: 'b', suite: 's1', wellFormed: true, hasExpected: true, reference: 'accepted', correctedKey: 'k2' },
      { id: 'c', suite: 's1', wellFormed: true, hasExpected: true, reference: 'wrong_answer', correctedKey: 'k2' },
      { id: 'd', suite: 's2', wellFormed: true, hasExpected: true, reference: 'wrong_answer', correctedKey: 'k2' },
      { id: 'e', suite: 's1', wellFormed: true, hasExpected: true, reference: 'runtime_error', correctedKey: null },
      { id: 'f', suite: 's1', wellFormed: false, hasExpected: false, reference: null, correctedKey: null },
      { id: 'g', suite: 's1', wellFormed: true, hasExpected: true, reference: 'sandbox_error', correctedKey: null },
    ]);
    expect(judged.map((t) => [t.id, t.status, t.reason])).toEqual([
      ['a', 'valid', 'ok'],
      ['b', 'valid', 'ok'],
      ['c', 'invalid', 'duplicate'],
      ['d', 'corrected', 'expected-mismatch'],
      ['e', 'invalid', 'reference-raises'],
      ['f', 'invalid', 'malformed'],
      ['g', 'unknown', 'reference-sandbox-error'],
    ]);
  });
});

describe('Code-A1 invalid_t: every test a suite holds that is not valid counts', () => {
  // One suite of 8 tests read outside a code block: 4 malformed assert lines (the release counts
  // them; asserts of a code block that are not tests never become tests), 1 without an expected
  // value, 1 the reference raises on, 1 corrected (stated value wrong, still used), 1 valid.
  const judged = codeA1JudgeTests([
    ...[0, 1, 2, 3].map((i) => ({ id: `m${i}`, suite: 's', wellFormed: false, hasExpected: false, reference: null, correctedKey: null })),
    { id: 'n', suite: 's', wellFormed: true, hasExpected: false, reference: null, correctedKey: null },
    { id: 'r', suite: 's', wellFormed: true, hasExpected: true, reference: 'runtime_error', correctedKey: null },
    { id: 'c', suite: 's', wellFormed: true, hasExpected: true, reference: 'wrong_answer', correctedKey: 'k-c' },
    { id: 'v', suite: 's', wellFormed: true, hasExpected: true, reference: 'accepted', correctedKey: 'k-v' },
  ]);

  it('counts malformed, no-expected, reference-raises and corrected', () => {
    expect(codeA1InvalidCount(judged.map((t) => ({ status: t.status, reason: t.reason })))).toBe(7);
  });

  it('valid_ratio on a hand-made matrix: min(2/8, 1 - 7/8)', () => {
    // p0 passes the valid test and fails the corrected one; the two usable tests are c and v.
    const m = parseMatrix({
      programs: [{ id: 'p0', valid: true }],
      tests: [
        { id: 'c', suite: 's', status: 'corrected' },
        { id: 'v', suite: 's', status: 'valid' },
      ],
      verdicts: verdictsFromCodes(['WA']),
    });
    const r = codeA1Rewards({ matrix: m, suites: [{ id: 's', program: 'p0', invalidCount: codeA1InvalidCount(judged), nonprintableRatio: 0 }] });
    const s = r.programs[0]!.suites[0]!;
    expect(s.validRatio).toBe(1 - 7 / 8);
    // attack = gen_fail = 1/8; R_test = 0.5 * 1/8 + 0.5 * 1/8.
    expect(s.rTest).toBe(0.5 * (1 - 7 / 8) + 0.5 * (1 / 8));
  });
});

describe('Code-A1 Mistake Book: the release rule by default', () => {
  const ob = (testKey: string, verdict: 'accepted' | 'wrong_answer', origin: 'generated' | 'replay') => ({
    testKey,
    testHash: `h-${testKey}`,
    programValid: true,
    testValid: true,
    verdict,
    origin,
  });
  const stored = updateMistakeBook(emptyMistakeBook(), { round: 1, observations: [ob('old', 'wrong_answer', 'generated')] }).state;

  it('+1 only for failed generated tests, -1 only for passed replayed tests', () => {
    const u = updateMistakeBook(stored, {
      round: 2,
      observations: [
        ob('old', 'wrong_answer', 'replay'), // a replay failure: nothing
        ob('old', 'accepted', 'generated'), // a generated pass of a stored test: nothing
        ob('new', 'wrong_answer', 'generated'),
      ],
    });
    expect(u.changes.map((c) => [c.testKey, c.delta, c.cause])).toEqual([['new', 1, 'fail']]);
  });

  it('replay ties keep the oldest first; no cap unless asked', () => {
    let book = emptyMistakeBook();
    for (const [round, key] of [
      [1, 'zz'],
      [2, 'mm'],
      [3, 'aa'],
    ] as const) {
      const u = updateMistakeBook(book, { round, observations: [ob(key, 'wrong_answer', 'generated')] });
      expect(applyMistakeBookChanges(book, u.changes)).toEqual(u.state);
      book = u.state;
    }
    expect(topTests(book, 8).map((t) => t.testKey)).toEqual(['zz', 'mm', 'aa']);
    const many = updateMistakeBook(emptyMistakeBook(), {
      round: 1,
      observations: Array.from({ length: 100 }, (_, i) => ob(`k${i}`, 'wrong_answer', 'generated')),
    });
    expect(many.state.entries.length).toBe(100);
  });
});

describe('Mistake Book order as the release keeps it (trainer_a1.py MistakeBook)', () => {
  const ob = (testKey: string, verdict: 'accepted' | 'wrong_answer', origin: 'generated' | 'replay') => ({
    testKey,
    testHash: `h-${testKey}`,
    programValid: true,
    testValid: true,
    verdict,
    origin,
  });
  /** Folds rounds of observations, checking that the changes rebuild each book. */
  function fold(rounds: ReturnType<typeof ob>[][]) {
    let book = emptyMistakeBook();
    const tops: string[][] = [];
    rounds.forEach((observations, i) => {
      const u = updateMistakeBook(book, { round: i + 1, observations });
      expect(applyMistakeBookChanges(book, u.changes)).toEqual(u.state);
      book = u.state;
      tops.push(topTests(book, 8).map((t) => t.testKey));
    });
    return tops;
  }

  it('new tests are stored in the order they first failed, not in key order', () => {
    // Round 1: 'k-b' fails before 'k-a' (an earlier program, suite or test), 'k-b' twice.
    const [top] = fold([[ob('k-b', 'wrong_answer', 'generated'), ob('k-a', 'wrong_answer', 'generated'), ob('k-b', 'wrong_answer', 'generated')]]);
    expect(top).toEqual(['k-b', 'k-a']);
    const [one] = fold([[ob('k-b', 'wrong_answer', 'generated'), ob('k-a', 'wrong_answer', 'generated')]]);
    expect(one).toEqual(['k-b', 'k-a']);
  });

  it('every read sorts the stored list by count and keeps it: a tie follows the previous ranking', () => {
    // Stored [k-b 1, k-a 1]; k-a fails again: the next read ranks [k-a 2, k-b 1] and keeps that
    // order; k-b fails again: a tie at 2, and the stored order from that read puts k-a first
    // (first-failure order alone would put k-b first).
    const tops = fold([
      [ob('k-b', 'wrong_answer', 'generated'), ob('k-a', 'wrong_answer', 'generated')],
      [ob('k-a', 'wrong_answer', 'generated')],
      [ob('k-b', 'wrong_answer', 'generated')],
    ]);
    expect(tops).toEqual([
      ['k-b', 'k-a'],
      ['k-a', 'k-b'],
      ['k-a', 'k-b'],
    ]);
  });

  it("past 8 tests the replayed top 8 are the release's", () => {
    // Round 1: t9 ... t0 fail once each, in that order (stored t9 first; key order would give
    // t0, t1, t10...). Round 2: t0 fails again, t9's replay passes (removed at 0), t10 is new.
    // Read after round 2: t0 (2) first, then the stored order t8, t7, ..., t1, then t10.
    const r1 = Array.from({ length: 10 }, (_, i) => ob(`t${9 - i}`, 'wrong_answer', 'generated'));
    const r2 = [ob('t0', 'wrong_answer', 'generated'), ob('t9', 'accepted', 'replay'), ob('t10', 'wrong_answer', 'generated')];
    const tops = fold([r1, r2]);
    expect(tops[0]).toEqual(['t9', 't8', 't7', 't6', 't5', 't4', 't3', 't2']);
    expect(tops[1]).toEqual(['t0', 't8', 't7', 't6', 't5', 't4', 't3', 't2']);
  });
});

describe('Code-A1 code-group filter (defined in the release, never called)', () => {
  it('is off by default: a uniform group still trains (with zero advantages)', () => {
    expect(codeA1CodeSelection([1, 1, 1], { std: 'sample' })).toEqual({ kept: true, advantages: [0, 0, 0] });
    expect(codeA1CodeSelection([1, 1, 1], { std: 'sample', filterUniform: true })).toEqual({ kept: false, advantages: [0, 0, 0] });
    expect(codeA1CodeSelection([0, 1], { std: 'sample', filterUniform: true }).kept).toBe(true);
  });
});

describe('CURE as released', () => {
  it('with no incorrect program, an accurate test gets +1 and an inaccurate one -1', () => {
    // 2 programs, both pass the GT test: t0 passes both (+1), t1 fails one (-1).
    const m = parseMatrix({
      programs: [{ id: 'p0' }, { id: 'p1' }],
      tests: [
        { id: 'gt0', suite: 'gt' },
        { id: 't0', suite: 'gen' },
        { id: 't1', suite: 'gen' },
      ],
      verdicts: verdictsFromCodes(['AAA', 'AAW']),
    });
    const r = cureRewards(m);
    expect(r.tests.map((t) => t.reward)).toEqual([1, -1]);
  });

  it('a problem whose rewards have no spread is dropped; z-normalization is population std without epsilon', () => {
    expect(cureAdvantages([0.5, 0.5, 0.5])).toBeNull();
    expect(cureAdvantages([1])).toBeNull();
    expect(cureAdvantages([0, 1])).toEqual([-1, 1]);
  });

  it('no GT test is a clear error, not NaN code rewards', () => {
    const m = parseMatrix({ programs: [{ id: 'p0' }], tests: [{ id: 't0', suite: 'gen' }], verdicts: [['accepted']] });
    expect(() => cureRewards(m)).toThrow(/no ground-truth test/);
  });
});

describe('EvolveCoder as released', () => {
  it('adversarial picks: exhaustive search over mid-pass triples, min pairwise Hamming, then total', () => {
    // Over 10 tests. Top 2: a, b. Mid pool [0.4, 0.9): c, d, e, x.
    // Greedy from {a, b} would take x (farthest from the top), then c, then e.
    // Triples: {x,c,e} min 2 total 18; {c,d,e} min 2 total 20; any with x and d: min 1.
    const m = parseMatrix({
      programs: ['a', 'b', 'c', 'd', 'e', 'x'].map((id) => ({ id })),
      tests: tests(10),
      verdicts: verdictsFromCodes([
        'AAAAAAAAAA', // a 1
        'AAAAAAAAAA', // b 1
        'AAAAAWWWWW', // c .5
        'WWWWWAAAAA', // d .5
        'AAAAWWWWWA', // e .5
        'WWWWWWAAAA', // x .4
      ]),
    });
    const s = selectForAugmentation(m, [...Array(10).keys()], {}, new Rng(1));
    expect(s.top).toEqual([0, 1]);
    expect(s.mid).toEqual([2, 3, 4]);
    expect(s.fallback).toBe(false);
  });

  it('fewer than 3 mid programs: 3 random programs with pass rate > 0.1 instead', () => {
    const m = parseMatrix({
      programs: ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id })),
      tests: tests(10),
      verdicts: verdictsFromCodes(['AAAAAAAAAA', 'AAAAAAAAAA', 'AAWWWWWWWW', 'AWWWWWWWWW', 'WWWWWWWWWW']),
    });
    const s = selectForAugmentation(m, [...Array(10).keys()], {}, new Rng(3));
    expect(s.fallback).toBe(true);
    // pass rate > 0.1: a, b, c (d is exactly 0.1, e is 0)
    expect([...s.mid].sort()).toEqual([0, 1, 2]);
  });

  it('discriminative picks: a group of identical signatures chosen at random by size, filled by nearest', () => {
    // Two groups: {p0, p1} (AAWW) and {p2, p3, p4} (WWAA); p5 (AAAW) is nearest to the first.
    const m = parseMatrix({
      programs: ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'].map((id) => ({ id })),
      tests: tests(4),
      verdicts: verdictsFromCodes(['AAWW', 'AAWW', 'WWAA', 'WWAA', 'WWAA', 'AAAW']),
    });
    const seen = new Set<string>();
    for (let seed = 0; seed < 30; seed++) seen.add(selectSimilarPrograms(m, [0, 1, 2, 3], 3, new Rng(seed)).join(','));
    expect([...seen].sort()).toEqual(['0,1,5', '2,3,4']);
    // No two programs share a signature: the k with least total distance to all.
    const distinct = parseMatrix({
      programs: ['q0', 'q1', 'q2', 'q3'].map((id) => ({ id })),
      tests: tests(4),
      verdicts: verdictsFromCodes(['AAAA', 'AAAW', 'AAWW', 'WWWW']),
    });
    // totals: q0 1+2+4=7, q1 1+1+3=5, q2 2+1+2=5, q3 4+3+2=9
    expect(selectSimilarPrograms(distinct, [0, 1, 2, 3], 2, new Rng(0))).toEqual([1, 2]);
  });

  it('redundancy reduction keeps one test per signature chosen at random (seeded)', () => {
    const m = parseMatrix({ programs: [{ id: 'p0' }, { id: 'p1' }], tests: tests(6), verdicts: verdictsFromCodes(['AAAAAA', 'WWWWWW']) });
    const picks = new Set<string>();
    for (let seed = 0; seed < 20; seed++) {
      const kept = reduceRedundancy(m, [0, 1, 2, 3, 4, 5], 1, new Rng(seed));
      expect(kept.length).toBe(1);
      expect(reduceRedundancy(m, [0, 1, 2, 3, 4, 5], 1, new Rng(seed))).toEqual(kept);
      picks.add(String(kept[0]));
    }
    expect(picks.size).toBeGreaterThan(1); // not always the first
  });

  it('final filter: the < 0.1 pass-rate filter first, then at most 5 per signature', () => {
    // 10 programs; t0..t5 share signature "1000000000"-ish? No: t0..t5 passed by p0 only (0.1, kept),
    // t6 passed by nobody (dropped before the per-signature cap, so it never takes a slot).
    const rows = Array.from({ length: 10 }, (_, p) => (p === 0 ? 'AAAAAAW' : 'WWWWWWW'));
    const m = parseMatrix({ programs: rows.map((_, i) => ({ id: `p${i}` })), tests: tests(7), verdicts: verdictsFromCodes(rows) });
    const r = finalFilter(m, [0, 1, 2, 3, 4, 5, 6], {}, new Rng(0));
    expect(r.tests.length).toBe(5);
    expect(r.tests).not.toContain(6);
    expect(r.lowPass).toEqual([6]);
  });
});
