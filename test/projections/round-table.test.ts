/**
 * The round table and `crucible compare` on hand-made logs: a figure a method does not have is
 * null and printed as a dash (never 0.0%), and it gives no difference in a comparison.
 */
import { describe, expect, it } from 'vitest';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { makeEvent, type EventDataInput, type EventType } from '../../src/events/catalog.js';
import { emptyRoundTable, reduceRoundTable, roundRows, type RoundRow } from '../../src/projections/round-table.js';
import { compareRuns, formatValue } from '../../src/report/compare.js';
import { roundTable } from '../../src/cli/commands/run.js';
import type { RoundSelection } from '../../src/projections/answer-selection.js';

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
const H = (c: string) => c.repeat(64);

/** One round of one problem: `judged` generated tests judged, 4 of 8 sampled tests valid, 2
 * known-incorrect programs of which the suites kill 1, rewards 0.5 and 0.25. */
function oneRound(method: string, judged: number, bookEnabled: boolean): RoundRow {
  const events = [
    ev('RunStarted', {
      method,
      config: { method, mistakeBook: { enabled: bookEnabled } },
      configHash: H('a'),
      seed: 1,
      crucibleVersion: '0.1.0',
      problems: [{ problemId: 'p', problemHash: H('b') }],
    }),
    ev('RoundStarted', { round: 1, problemIds: ['p'] }),
    ev('TestsJudged', {
      round: 1,
      problemId: 'p',
      tests: Array.from({ length: judged }, (_, i) => ({
        testId: `s/${i}`,
        testHash: H('c'),
        valid: true,
        reason: 'ok' as const,
        status: 'valid' as const,
        oracleHash: H('c'),
      })),
    }),
    ev('ProblemEvaluated', {
      round: 1,
      problemId: 'p',
      heldOut: { programs: 4, passed: 1 },
      kill: { targets: 2, suites: 1, killed: judged > 0 ? 1 : 0 },
      tests: { sampled: 8, wellFormed: judged, valid: judged > 0 ? 4 : 0 },
      mistakeBook: { size: 0 },
      rewards: { code: 0.5, test: judged > 0 ? 0.25 : 0 },
    }),
    ev('RoundCompleted', { round: 1 }),
  ];
  return roundRows(events.reduce(reduceRoundTable, emptyRoundTable()))[0]!;
}

const selection = (generated: number | null, withBook: number | null): RoundSelection[] => [
  { round: 1, problems: 1, generated, withBook, random: 0.25, oracle: 1 },
];

describe('figures that do not exist', () => {
  const golden = oneRound('golden-tests', 0, false);
  const codeA1 = oneRound('code-a1', 8, true);
  const cure = oneRound('cure', 8, true);

  it('golden-tests judges no generated test: validity, kill rate and test reward are null', () => {
    expect(golden).toMatchObject({ heldOutPass: 0.25, validity: null, killRate: null, mistakeBook: null, codeReward: 0.5, testReward: null });
    expect(codeA1).toMatchObject({ heldOutPass: 0.25, validity: 0.5, killRate: 0.5, mistakeBook: 0, codeReward: 0.5, testReward: 0.25 });
    // CURE keeps no Mistake Book, whatever its config's mistakeBook section says.
    expect(cure).toMatchObject({ validity: 0.5, killRate: 0.5, mistakeBook: null, testReward: 0.25 });
  });

  it('the round table prints a dash, not 0.0%', () => {
    const line = roundTable([golden])
      .split('\n')
      .at(-1)!
      .trim()
      .split(/\s{2,}/);
    // round, held-out pass, P(correct), test validity, P(valid test), kill rate, mistake book, code reward, test reward, seconds
    expect(line).toEqual(['1', '25.0%', '-', '-', '-', '-', '-', '0.500', '-', '0.0']);
  });

  it('compare gives null (a dash) and no difference where a run lacks the figure', () => {
    const tables = compareRuns([
      { rows: [codeA1], selection: selection(1, 1) },
      { rows: [golden], selection: selection(null, null) },
    ]);
    const at = (metric: string) => tables.find((t) => t.metric === metric)!.rows[0]!;
    for (const metric of ['validity', 'killRate', 'mistakeBook', 'testReward', 'bestOfN', 'bestOfNBook']) {
      expect([metric, at(metric).values[1], at(metric).diffs[1]]).toEqual([metric, null, null]);
    }
    expect(at('heldOutPass')).toEqual({ round: 1, values: [0.25, 0.25], diffs: [null, 0] });
    expect(formatValue('share', at('validity').values[1]!)).toBe('-');
    expect(formatValue('share', at('validity').values[0]!)).toBe('50.0%');
    // A run with generated tests but no Mistake Book: best-of-N exists, its with-book twin does not.
    const noBook = compareRuns([
      { rows: [cure], selection: selection(0.5, 0.5) },
      { rows: [codeA1], selection: selection(1, 1) },
    ]);
    expect(noBook.find((t) => t.metric === 'bestOfN')!.rows[0]!.values).toEqual([0.5, 1]);
    expect(noBook.find((t) => t.metric === 'bestOfNBook')!.rows[0]!.values).toEqual([null, 1]);
  });
});
