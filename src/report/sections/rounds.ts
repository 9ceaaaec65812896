/** Section: the first run's round table, answer selection, Mistake Book size and reward histograms. */
import type { RoundRow } from '../../projections/round-table.js';
import type { RoundSelection } from '../../projections/answer-selection.js';
import { card, notRecorded, pct, table } from './html-parts.js';

export function roundsHtml(
  rows: readonly RoundRow[],
  selection: readonly RoundSelection[],
  keepsBook: boolean,
  rewarded: { code: boolean; test: boolean },
): string {
  const rewards = (role: 'code' | 'test') =>
    rewarded[role]
      ? card(`${role === 'code' ? 'Code' : 'Test'} rewards`, `chart-rewards-${role}`)
      : notRecorded(`${role === 'code' ? 'Code' : 'Test'} rewards`, `the method rewards no ${role} sample`);
  const head = [
    'round',
    'P(correct)',
    'P(valid test)',
    'held-out pass',
    'test validity',
    'kill rate',
    ...(keepsBook ? ['mistake book'] : []),
    'code reward',
    'test reward',
    'best-of-N',
    ...(keepsBook ? ['best-of-N + book'] : []),
    'random pick',
    'oracle',
  ];
  const body = rows.map((r) => {
    const s = selection.find((x) => x.round === r.round);
    return [
      String(r.round),
      pct(r.exactCorrect),
      pct(r.exactValid),
      pct(r.heldOutPass),
      pct(r.validity),
      pct(r.killRate),
      ...(keepsBook ? [r.mistakeBook === null ? '-' : String(r.mistakeBook)] : []),
      r.codeReward.toFixed(3),
      r.testReward === null ? '-' : r.testReward.toFixed(3),
      s ? pct(s.generated) : '-',
      ...(keepsBook ? [s ? pct(s.withBook) : '-'] : []),
      s ? pct(s.random) : '-',
      s ? pct(s.oracle) : '-',
    ];
  });
  const selectionNote = `<p class="meta">best-of-N by generated-test${keepsBook ? ' (and Mistake Book)' : ''} pass rate, against a random pick (exact expectation) and the best sample</p>`;
  return `<h2>Rounds</h2>
<div class="scroll">${table(head, body, 'rounds')}</div>
<div class="grid" style="margin-top:16px">
${card('Answer selection: held-out pass of the pick', 'chart-selection', selectionNote)}
${keepsBook ? card('Mistake Book size', 'chart-book') : ''}
${rewards('code')}
${rewards('test')}
</div>`;
}
