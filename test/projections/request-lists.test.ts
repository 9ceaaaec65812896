/** The request lists' text, written out by hand for speed, is JSON.stringify's text of the same lists. */
import { describe, expect, it } from 'vitest';
import { requestListsText } from '../../src/projections/request-lists.js';
import type { EventData } from '../../src/events/catalog.js';

const hash = (c: string) => c.repeat(64);

describe('requestListsText', () => {
  it('is the text JSON.stringify gives, ids that need escaping included', () => {
    const d = {
      round: 1,
      problemId: 'p',
      requestId: 'r',
      purpose: 'reward',
      programs: [{ programId: 'a"quoted\\one', programHash: hash('a') }, { programId: 'é\u2028\n', programHash: hash('b') }],
      tests: [{ testId: 't/0', testHash: hash('c') }, { testId: '\u0001', testHash: hash('d') }, { testId: 't/2', testHash: hash('e') }],
      pairs: [0, 0, 1, 2, 1, 1],
      reused: [0, 1],
    } as EventData<'ExecutionRequested'>;
    const expected = (reused: number[]) => JSON.stringify({
      programIds: d.programs.map((p) => p.programId),
      programHashes: d.programs.map((p) => p.programHash),
      testIds: d.tests.map((t) => t.testId),
      testHashes: d.tests.map((t) => t.testHash),
      pairs: d.pairs,
      reused,
    });
    expect(requestListsText(d)).toBe(expected([0, 1]));
    // Reused pairs are kept for collected requests only.
    expect(requestListsText({ ...d, purpose: 'kill' })).toBe(expected([]));
    expect(requestListsText({ ...d, programs: [], tests: [], pairs: [], reused: [] })).toBe(
      JSON.stringify({ programIds: [], programHashes: [], testIds: [], testHashes: [], pairs: [], reused: [] }),
    );
  });
});
