/**
 * A run written as Parquet files, one table per file (`<table>.parquet`, see export-tables.ts and
 * docs/export.md), for analysis outside crucible (pandas, DuckDB, Spark...). The run is opened
 * read-only, as `crucible report` opens it.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { EventData } from '../events/catalog.js';
import { EXPORT_TABLES, type RunSource } from './export-tables.js';
import { writeParquetTable } from './parquet-table.js';
import { NotARunError, withRun } from './run-data.js';

/** The version of the tables' layout, in every file's metadata (`crucible.export`). */
export const EXPORT_VERSION = '1';

export interface ExportedTable {
  name: string;
  file: string;
  rows: number;
}

export async function exportRunParquet(dir: string, outDir: string): Promise<{ runId: string; tables: ExportedTable[] }> {
  return withRun(dir, async (log, runner, summary) => {
    let started: EventData<'RunStarted'> | undefined;
    for await (const e of log.read({ limit: 1 }, { runId: summary.runId, types: ['RunStarted'] })) started = e.data as EventData<'RunStarted'>;
    if (!started) throw new NotARunError(dir, 'the log has no RunStarted event: not a crucible run');
    const source: RunSource = {
      events: (types) => log.read({}, { runId: summary.runId, types }),
      db: runner.readModel.db,
      summary,
      started,
    };
    mkdirSync(outDir, { recursive: true });
    const tables: ExportedTable[] = [];
    for (const table of EXPORT_TABLES) {
      const file = path.join(outDir, `${table.name}.parquet`);
      const metadata = { 'crucible.export': EXPORT_VERSION, 'crucible.table': table.name, 'crucible.run': summary.runId };
      tables.push({ name: table.name, file, rows: await writeParquetTable(file, table, table.rows(source), metadata) });
    }
    return { runId: summary.runId, tables };
  });
}
