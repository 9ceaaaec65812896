import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { LOG_FILE, loadRunSummary, NotARunError, type RunSummary } from '../../report/run-data.js';
import { compareRuns, formatValue, runLabel } from '../../report/compare.js';
import { configDiff, formatSetting } from '../../report/config-diff.js';
import { EXIT_FAILED, UserError, userFacing } from '../errors.js';
import { formatTable } from '../table.js';

const pct = (x: number | null | undefined) => (x === undefined || x === null ? '-' : `${(100 * x).toFixed(1)}%`);

/** A run summary for printing (the resolved config stays out: it is in the log). */
function headline(s: RunSummary) {
  const last = s.rows.at(-1);
  const sel = s.selection.find((x) => x.round === last?.round);
  return {
    dir: s.dir,
    runId: s.runId,
    name: s.name,
    method: s.method,
    seed: s.seed,
    status: s.status,
    failure: s.failure,
    rounds: s.rows.length,
    plannedRounds: s.plannedRounds,
    last: last ?? null,
    lastSelection: sel ?? null,
  };
}

export function registerRuns(program: Command): void {
  program
    .command('runs')
    .description('list the runs in a directory: config, method, seed, status, rounds, last round figures')
    .argument('[dir]', 'directory holding run directories', 'runs')
    .option('--json', 'print one JSON object per run')
    .action(async (dir: string, opts: { json?: boolean }) => {
      if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UserError(`${dir}: no such directory`);
      const dirs = readdirSync(dir)
        .sort()
        .map((d) => path.join(dir, d))
        .filter((d) => existsSync(path.join(d, LOG_FILE)));
      const runs: ReturnType<typeof headline>[] = [];
      const unreadable: { dir: string; unreadable: string }[] = [];
      for (const d of dirs) {
        try {
          runs.push(headline(await loadRunSummary(d)));
        } catch (err) {
          // One unreadable run does not hide the others: it is listed with the reason (the line
          // its command would print), and the exit status says that some run was not read.
          const known = err instanceof NotARunError ? { message: err.message } : userFacing(err);
          unreadable.push({ dir: d, unreadable: known ? known.message : err instanceof Error ? err.message : String(err) });
          process.exitCode = EXIT_FAILED;
        }
      }
      if (opts.json) {
        for (const r of runs) process.stdout.write(`${JSON.stringify(r)}\n`);
        for (const u of unreadable) process.stdout.write(`${JSON.stringify(u)}\n`);
        return;
      }
      if (runs.length === 0 && unreadable.length === 0) {
        process.stdout.write(`no runs in ${dir}\n`);
        return;
      }
      const out: string[] = [];
      if (runs.length > 0) {
        out.push(
          formatTable(
            [
              'run',
              'config',
              'method',
              'seed',
              'status',
              'rounds',
              'held-out pass',
              'P(correct)',
              'P(valid test)',
              'validity',
              'kill rate',
              'mistake book',
              'best-of-N',
            ],
            runs.map((r) => [
              path.basename(r.dir),
              r.name,
              r.method,
              String(r.seed),
              r.status,
              `${r.rounds}/${r.plannedRounds ?? '?'}`,
              pct(r.last?.heldOutPass),
              pct(r.last?.exactCorrect),
              pct(r.last?.exactValid),
              pct(r.last?.validity),
              pct(r.last?.killRate),
              r.last && r.last.mistakeBook !== null ? String(r.last.mistakeBook) : '-',
              pct(r.lastSelection?.generated),
            ]),
          ),
        );
      }
      if (unreadable.length > 0) out.push('', 'unreadable:', ...unreadable.map((u) => `  ${path.basename(u.dir)}: ${u.unreadable}`));
      process.stdout.write(`${out.join('\n')}\n`);
    });

  program
    .command('compare')
    .description('print the round tables of several runs side by side, with differences from the first')
    .argument('<run-dirs...>', 'two or more run directories, e.g. runs/<a> runs/<b>')
    .option('--json', 'print JSON')
    .action(async (dirs: string[], opts: { json?: boolean }) => {
      if (dirs.length < 2) throw new UserError('compare needs at least two run directories');
      const runs: RunSummary[] = [];
      for (const d of dirs) runs.push(await loadRunSummary(d));
      const tables = compareRuns(runs);
      const config = configDiff(runs.map((r) => r.config));
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ runs: runs.map((r, i) => ({ label: runLabel(i), ...headline(r) })), config, tables })}\n`);
        return;
      }
      const out: string[] = [];
      runs.forEach((r, i) => out.push(`${runLabel(i)}  ${r.runId}  (${r.method}, seed ${r.seed}, ${r.status}, ${r.rows.length} rounds)  ${r.dir}`));
      out.push('', 'config');
      out.push(
        config.length === 0
          ? 'the same in every run'
          : formatTable(
              ['setting', ...runs.map((_, i) => runLabel(i))],
              config.map((d) => [d.key, ...d.values.map(formatSetting)]),
            ),
      );
      for (const t of tables) {
        const headers = ['round', ...runs.flatMap((_, i) => (i === 0 ? [runLabel(0)] : [runLabel(i), `${runLabel(i)}-${runLabel(0)}`]))];
        const rows = t.rows.map((row) => [
          String(row.round),
          ...row.values.flatMap((v, i) => (i === 0 ? [formatValue(t.kind, v)] : [formatValue(t.kind, v), formatValue(t.kind, row.diffs[i] ?? null, true)])),
        ]);
        out.push('', t.label, formatTable(headers, rows));
      }
      process.stdout.write(`${out.join('\n')}\n`);
    });
}
