import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  discriminativeCheck,
  finalFilter,
  groupBySignature,
  hamming,
  lowPassFilter,
  reduceRedundancy,
  selectForAugmentation,
  selectSimilarPrograms,
} from '../../src/rewards/evolvecoder.js';
import { type Verdict } from '../../src/core/verdicts.js';
import { Rng } from '../../src/core/rng.js';
import { parseMatrix, programPassCount, testPassCount, verdictsFromCodes } from '../../src/rewards/matrix.js';
import { DATASETS, HAVE_DATASETS } from '../support/datasets.js';

const ids = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, suite: 's' }));

describe('EvolveCoder selection', () => {
  // 10 candidates x 4 tests.
  // t0 passed by 1/10 (kept: exactly 10%), t1 by 0/10 (dropped), t2 by 5, t3 all sandbox errors.
  const low = parseMatrix({
    programs: [{ id: 'ref', isReference: true }, ...Array.from({ length: 10 }, (_, i) => ({ id: `p${i}` }))],
    tests: ids(4, 't'),
    verdicts: verdictsFromCodes(['AAAA', 'AWAS', 'WWAS', 'WWAS', 'WWAS', 'WWAS', 'WWWS', 'WWWS', 'WWWS', 'WWWS', 'WWWS']),
  });

  it('drops tests passed by fewer than 10% of candidates', () => {
    const r = lowPassFilter(low, [0, 1, 2, 3]);
    expect(r.kept).toEqual([0, 2]);
    expect(r.dropped).toEqual([
      { test: 1, passRate: 0, observed: 10, reason: 'low_pass' },
      { test: 3, passRate: 0, observed: 0, reason: 'unobserved' },
    ]);
  });

  it('hamming distance ignores unknown cells', () => {
    expect(hamming(['pass', 'fail', 'unknown', 'pass'], ['fail', 'fail', 'pass', 'unknown'])).toBe(1);
  });

  it('top-2 by pass rate, then the mid-pass triple with the largest min pairwise Hamming distance', () => {
    // pass rates over 10 tests: a 1.0, b 0.9, c 0.8, d 0.8 (same vector as c), e 0.5, f 0.3, g 0.4
    const m = parseMatrix({
      programs: ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((id) => ({ id })),
      tests: ids(10, 't'),
      verdicts: verdictsFromCodes([
        'AAAAAAAAAA', // a 1.0
        'AAAAAAAAAW', // b 0.9 (not mid: [0.4, 0.9) excludes 0.9)
        'AAAAAAAAWW', // c 0.8
        'AAAAAAAAWW', // d 0.8
        'WWWWWAAAAA', // e 0.5
        'AAAWWWWWWW', // f 0.3 (below mid)
        'WWWWWWAAAA', // g 0.4
      ]),
    });
    const s = selectForAugmentation(m, [...Array(10).keys()], {}, new Rng(0));
    expect(s.top).toEqual([0, 1]);
    // Mid pool (rate in [0.4, 0.9)): c, d, e, g. Pairwise: c-d 0, c-e 7, c-g 8, e-g 1 (d as c).
    // Triples with c and d have min 0; {c, e, g} and {d, e, g} have min 1, total 16: the earlier.
    expect(s.mid).toEqual([2, 4, 6]);
    expect(s.ids).toEqual(['a', 'b', 'c', 'e', 'g']);
    expect(s.passRates).toEqual([1, 0.9, 0.8, 0.5, 0.4]);
  });

  it('redundancy reduction keeps one test per signature; discriminative check; similar programs', () => {
    const m = parseMatrix({
      programs: [{ id: 'p0' }, { id: 'p1' }, { id: 'p2' }],
      tests: ids(5, 't'),
      // signatures: t0 "110", t1 "110", t2 "111", t3 "001", t4 "110"
      verdicts: verdictsFromCodes(['AAAWA', 'AAAWA', 'WWAAW']),
    });
    expect(groupBySignature(m, [0, 1, 2, 3, 4]).map((g) => [g.signature, g.tests])).toEqual([
      ['110', [0, 1, 4]],
      ['111', [2]],
      ['001', [3]],
    ]);
    const one = reduceRedundancy(m, [0, 1, 2, 3, 4], 1, new Rng(0));
    expect(one.length).toBe(3);
    expect(one.filter((t) => [0, 1, 4].includes(t)).length).toBe(1);
    expect(one).toContain(2);
    expect(one).toContain(3);
    expect(reduceRedundancy(m, [0, 1, 2, 3, 4], 2, new Rng(0)).length).toBe(4);
    // passed by >= 1 and failed by >= 1 of {p0, p2}: t0, t1, t3, t4 (t2 passed by both)
    expect(discriminativeCheck(m, [0, 1, 2, 3, 4], [0, 2])).toEqual([0, 1, 3, 4]);
    // The 2 most similar programs: p0 and p1 (distance 0).
    expect(selectSimilarPrograms(m, [0, 1, 2, 3, 4], 2, new Rng(0))).toEqual([0, 1]);
  });

  it('final filter: <= 5 per signature, drop problems with < 5 tests or > 60 perfect solutions', () => {
    // 7 tests with one signature (everyone passes) + 1 distinct: 5 + 1 = 6 tests kept.
    const m = parseMatrix({
      programs: [{ id: 'p0' }, { id: 'p1' }],
      tests: ids(8, 't'),
      verdicts: verdictsFromCodes(['AAAAAAAA', 'AAAAAAAW']),
    });
    const r = finalFilter(m, [...Array(8).keys()], {}, new Rng(0));
    expect(r.tests.length).toBe(6);
    expect(r.tests).toContain(7);
    expect(r.perfect).toBe(1);
    expect(r.keepProblem).toBe(true);
    expect(finalFilter(m, [0, 1, 2, 3], {}, new Rng(0)).reason).toBe('too_few_tests');
    expect(finalFilter(m, [...Array(8).keys()], { maxPerfect: 0 }, new Rng(0)).reason).toBe('too_many_perfect');
  });
});

describe.skipIf(!HAVE_DATASETS)('EvolveCoder on the released prototype records', () => {
  const file = path.join(DATASETS, 'evolvecoder_prototype_round0/step2.2_eval_gpt_4.1_mini_seed42_round0.jsonl');
  const records = !HAVE_DATASETS
    ? []
    : readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map(
          (l) =>
            JSON.parse(l) as {
              id: number;
              gen_result: { eval_results: { pass_rate: number; test_cases_pass_status: { reason: string }[] }[] };
            },
        );
  // The records' reasons: pass, fail, timeout, unexecuted (the program did not load).
  const toVerdict = (reason: string): Verdict => {
    const v = ({ pass: 'accepted', fail: 'wrong_answer', timeout: 'time_limit', unexecuted: 'compile_error' } as const)[reason];
    if (v === undefined) throw new Error(`unexpected reason ${reason}`);
    return v;
  };

  it('pass rates agree with the records and the low-pass filter keeps exactly the >= 10% tests', () => {
    expect(records.length).toBe(4);
    for (const rec of records) {
      const rows = rec.gen_result.eval_results;
      const nTests = rows[0]!.test_cases_pass_status.length;
      const m = parseMatrix({
        programs: rows.map((_, i) => ({ id: `p${i}` })),
        tests: ids(nTests, 't'),
        verdicts: rows.map((r) => r.test_cases_pass_status.map((s) => toVerdict(s.reason))),
      });
      const all = [...Array(nTests).keys()];
      rows.forEach((r, p) => {
        expect(programPassCount(m, p, all).passed / nTests).toBeCloseTo(r.pass_rate, 12);
      });
      const { kept, dropped } = lowPassFilter(m, all);
      expect(kept.length + dropped.length).toBe(nTests);
      for (const t of all) {
        const passed = rows.filter((r) => r.test_cases_pass_status[t]!.reason === 'pass').length;
        expect(kept.includes(t)).toBe(passed / rows.length >= 0.1);
        expect(testPassCount(m, t).passed).toBe(passed);
      }
      // Every record holds tests that nobody passes (wrong model-written expectations) or not;
      // either way the selection must return distinct candidates.
      const sel = selectForAugmentation(m, kept, {}, new Rng(rec.id));
      expect(new Set(sel.programs).size).toBe(sel.programs.length);
      expect(sel.programs.length).toBeLessThanOrEqual(5);
    }
  });
});
