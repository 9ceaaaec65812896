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

const same = (a: readonly RoundRow[], b: readonly RoundRow[]) => JSON.stringify(a) === JSON.stringify(b);
const rounds = (rs: readonly RoundRow[]) => rs.map((r) => r.round).join(', ') || 'none';

/** The read models' round table, checked against the log's. A read of the log can come back
 * short too (the chaos runs saw one at a run's end): where they differ the log is read again
 * until two reads agree, and only then are the read models rebuilt from it (and `missed` told
 * what differed). Rebuilt read models that still differ are an error, never a table printed. */
export async function checkedRoundRows(views: ProjectionRunner, log: EventLog, runId: string, missed: (line: string) => void): Promise<RoundRow[]> {
  const rows = roundRows(views.state<RoundTableState>('round-table'));
  let fromLog = await roundRowsFromLog(log, runId);
  if (same(rows, fromLog)) return rows;
  const first = fromLog;
  for (let i = 0; i < 3; i++) {
    const again = await roundRowsFromLog(log, runId);
    if (same(again, fromLog)) break;
    fromLog = again;
  }
  if (same(rows, fromLog)) {
    missed(`a read of the log came back short (rounds ${rounds(first)}); read again, it agrees with the read models, which stand`);
    return rows;
  }
  missed(`the read models missed events the log holds (their round table: rounds ${rounds(rows)}; the log's: rounds ${rounds(fromLog)}); rebuilt from the log`);
  await views.rebuild();
  const rebuilt = roundRows(views.state<RoundTableState>('round-table'));
  if (!same(rebuilt, fromLog))
    throw new Error(`the run's round table could not be read whole from the log: rebuilt, rounds ${rounds(rebuilt)}; read, rounds ${rounds(fromLog)}`);
  return rebuilt;
}
