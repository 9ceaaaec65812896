import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { loadRunDetail, type RunDetail } from '../../report/run-data.js';
import { chartJsSource, renderReport } from '../../report/html.js';
import { UserError } from '../errors.js';

export function registerReport(program: Command): void {
  program
    .command('report')
    .description(
      "write one self-contained HTML report: the headline by round of every run given (seeds of one setting as mean and band, controls beside), configs and their diff, then the first run's training steps, rounds, execution matrices and method sections",
    )
    .argument('<run-dirs...>', 'the run to report, e.g. runs/<run-id>, then any runs to overlay and compare it with')
    .option('--out <file>', 'the HTML file to write', 'report.html')
    .option(
      '--top <n>',
      'Mistake Book tests to list',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UserError(`--top ${v}: expected a positive integer`);
        return n;
      },
      10,
    )
    .action(async (dirs: string[], opts: { out: string; top: number }) => {
      const outDir = path.dirname(path.resolve(opts.out));
      if (!existsSync(outDir)) mkdirSync(outDir, { recursive: true });
      const runs: RunDetail[] = [];
      for (const d of dirs) runs.push(await loadRunDetail(d, { topTests: opts.top }));
      const html = renderReport(runs, chartJsSource());
      // Written whole, then renamed: a reader never sees half a report.
      const tmp = `${opts.out}.tmp-${process.pid}`;
      writeFileSync(tmp, html);
      renameSync(tmp, opts.out);
      const charts = (html.match(/<canvas /g) ?? []).length;
      process.stdout.write(
        `wrote ${opts.out} (${(html.length / 1024).toFixed(0)} KiB, ${charts} charts) for run ${runs[0]!.runId}${runs.length > 1 ? ` compared with ${runs.length - 1} more` : ''}\n`,
      );
    });
}
