import { describe, expect, it } from 'vitest';
import { aceLabels } from '../../src/rewards/ace.js';
import { parseMatrix, verdictsFromCodes } from '../../src/rewards/matrix.js';

describe('ACE labels', () => {
  //        i0 i1 i2 i3 i4 i5
  // ref     A  A  R  A  A  A   (robust)
  // p0      A  R  R  R  S  A
  // p1      A  A  R  R  S  A
  // p2      A  T  R  R  S  A
  // p3      C  C  C  C  C  C   (does not load: left out)
  const m = parseMatrix({
    programs: [{ id: 'ref', isReference: true }, { id: 'p0' }, { id: 'p1' }, { id: 'p2' }, { id: 'p3' }],
    tests: Array.from({ length: 6 }, (_, i) => ({ id: `i${i}`, suite: 'adv' })),
    verdicts: verdictsFromCodes(['AARAAA', 'ARRRSA', 'AARRSA', 'ATRRSA', 'CCCCCC']),
  });

  it('labels desirable, undesirable, suspect and unknown inputs', () => {
    const r = aceLabels(m);
    expect(r.tests.map((t) => [t.test, t.label, t.suspectBecause ?? null])).toEqual([
      ['i0', 'undesirable', null], // everyone survives
      ['i1', 'desirable', null], // crashes p0, hangs p2
      ['i2', 'suspect', 'robust_crash'], // crashes the reference too
      ['i3', 'suspect', 'all_crash'], // crashes every candidate
      ['i4', 'unknown', null], // only sandbox errors
      ['i5', 'undesirable', null],
    ]);
    expect(r.tests[1]).toMatchObject({ crashed: 2, survived: 1 });
  });

  it('selects programs surviving every trained-on input for SFT', () => {
    // trained on: i0, i1, i5; p1 survives all; p0 and p2 fail i1; p3 is left out.
    expect(aceLabels(m).sftPrograms).toEqual(['p1']);
  });

  it('suspect rule is configurable', () => {
    const asDesirable = aceLabels(m, undefined, { suspectLabel: 'desirable' });
    expect(asDesirable.tests[3]).toMatchObject({ label: 'desirable', suspectBecause: 'all_crash' });
    // Without the reference as robust, i2 crashes every candidate: still suspect, by all_crash.
    const noRef = aceLabels(m, [2], { referenceIsRobust: false });
    expect(noRef.tests[0]).toMatchObject({ label: 'suspect', suspectBecause: 'all_crash' });
    // With a high minimum, an all-crash input is simply desirable.
    const lenient = aceLabels(m, [3], { minProgramsForSuspect: 4 });
    expect(lenient.tests[0]!.label).toBe('desirable');
  });
});
