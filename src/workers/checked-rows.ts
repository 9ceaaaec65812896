/**
 * The round table a run reports, checked against one read of the log. A run's read models are
 * caught up piecewise as it goes; a catch-up that missed events (a read answered short while
 * servers failed) would leave rounds out of the table with nothing said. The check reads only
 * the round table's events (a few a round besides the Mistake Book's), so it costs little
 * beside the run.
 */
import type { EventLog } from '../events/log.js';
import type { ProjectionRunner } from '../projections/runner.js';
import { emptyRoundTable, reduceRoundTable, roundRows, type RoundRow, type RoundTableState } from '../projections/round-table.js';
import { roundTableProjection } from '../projections/run-views.js';

/** The round table from one read of the log, up to its head now. */
export async function roundRowsFromLog(log: EventLog, runId: string): Promise<RoundRow[]> {
  let table = emptyRoundTable();
  for await (const e of log.read({ to: await log.head() }, { runId, types: roundTableProjection.types! })) table = reduceRoundTable(table, e);
  return roundRows(table);
}

/** The read models' round table, or, when it differs from the log's, the read models rebuilt
 * from the log and `missed` told what differed. */
export async function checkedRoundRows(views: ProjectionRunner, log: EventLog, runId: string, missed: (line: string) => void): Promise<RoundRow[]> {
  const rows = roundRows(views.state<RoundTableState>('round-table'));
  const fromLog = await roundRowsFromLog(log, runId);
  if (JSON.stringify(rows) === JSON.stringify(fromLog)) return rows;
  const rounds = (rs: readonly RoundRow[]) => rs.map((r) => r.round).join(', ') || 'none';
  missed(`the read models missed events the log holds (their round table: rounds ${rounds(rows)}; the log's: rounds ${rounds(fromLog)}); rebuilt from the log`);
  await views.rebuild();
  return roundRows(views.state<RoundTableState>('round-table'));
}
