import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { LOG_FILE, loadRunSummary, NotARunError, type RunSummary } from '../../report/run-data.js';
import { compareRuns, formatValue, runLabel } from '../../report/compare.js';
import { formatEffect, pairBySeed, seedEffects, type SeedPairs } from '../../report/seed-effect.js';
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

function parseLast(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UserError(`--last must be a whole number of rounds >= 1, got ${v}`);
  return n;
}

/** Which configs an effect over seeds compares, on which seeds, differing in what. */
function effectSummary(pairs: SeedPairs) {
  return { trained: pairs.trained.label, control: pairs.control.label, seeds: pairs.trained.runs.map((r) => r.seed), differences: pairs.differences };
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
    .option('--last <n>', 'rounds at the end whose mean the effect over seeds also reports (default: the last half)', parseLast)
    .action(async (dirs: string[], opts: { json?: boolean; last?: number }) => {
      if (dirs.length < 2) throw new UserError('compare needs at least two run directories');
      const runs: RunSummary[] = [];
      for (const d of dirs) runs.push(await loadRunSummary(d));
      const tables = compareRuns(runs);
      const config = configDiff(runs.map((r) => r.config));
      // Several seeds of a config and of its control: the effect of training, paired by seed.
      const paired = pairBySeed(runs);
      const effect =
        paired.ok && paired.pairs.trained.runs.length >= 2
          ? { ...effectSummary(paired.pairs), tables: seedEffects(paired.pairs, opts.last ? { last: opts.last } : {}) }
          : null;
      // More than two runs: the effect is asked for, so say why there is none.
      const why = effect === null && runs.length > 2 ? (paired.ok ? 'only one seed in common' : paired.reason) : null;
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify({ runs: runs.map((r, i) => ({ label: runLabel(i), ...headline(r) })), config, tables, effect, ...(why ? { effectNotComputed: why } : {}) })}\n`,
        );
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
      if (effect) {
        out.push(
          '',
          `effect over seeds: ${effect.trained} minus ${effect.control}, paired by seed (${effect.seeds.join(', ')}), mean and bootstrap 95% interval over ${effect.seeds.length} seeds`,
          `  the configs differ in: ${effect.differences.join(', ') || 'nothing but their names'}`,
        );
        const rounds = effect.tables[0]!.rows.map((r) => (r.round === 'last' ? `rounds ${r.rounds[0]}-${r.rounds.at(-1)}` : String(r.round)));
        out.push(
          formatTable(
            ['metric', ...rounds],
            effect.tables.map((t) => [t.label, ...t.rows.map((r) => formatEffect(r.effect))]),
          ),
        );
      } else if (why) out.push('', `effect over seeds: not computed (${why})`);
      process.stdout.write(`${out.join('\n')}\n`);
    });
}
