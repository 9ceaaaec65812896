import type { Command } from 'commander';
import { exportRunParquet } from '../../report/export.js';
import { UserError } from '../errors.js';

const FORMATS = ['parquet'];

export function registerExport(program: Command): void {
  program
    .command('export')
    .description("write a run's tables (round table, rewards, executions, Mistake Book history, samples, tests, training steps) as files, one table per file")
    .argument('<run-dir>', 'the run, e.g. runs/<run-id>')
    .option('--format <format>', `file format: ${FORMATS.join(', ')}`, 'parquet')
    .requiredOption('--out <dir>', 'folder to write <table>.parquet into (made if missing; files of the same names are replaced)')
    .option('--json', 'print one JSON object: the run and each file with its rows')
    .action(async (dir: string, opts: { format: string; out: string; json?: boolean }) => {
      if (!FORMATS.includes(opts.format)) throw new UserError(`--format ${opts.format}: expected one of ${FORMATS.join(', ')}`);
      const result = await exportRunParquet(dir, opts.out);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(result)}\n`);
        return;
      }
      const rows = result.tables.map((t) => `${t.name} ${t.rows}`).join(', ');
      process.stdout.write(`wrote ${result.tables.length} tables of run ${result.runId} to ${opts.out} (rows: ${rows})\n`);
    });
}
