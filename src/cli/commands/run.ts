import type { Command } from 'commander';
import { loadConfigFile } from '../../config/load.js';
import { runExperiment, type RunProgress } from '../../actors/run.js';
import type { RoundRow } from '../../projections/round-table.js';
import { UserError } from '../errors.js';
import { isNatsLocation } from '../../events/open-log.js';
import { formatTable } from '../table.js';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export function roundTable(rows: readonly RoundRow[]): string {
  return formatTable(
    ['round', 'held-out pass', 'test validity', 'kill rate', 'mistake book', 'code reward', 'test reward', 'seconds'],
    rows.map((r) => [
      String(r.round),
      pct(r.heldOutPass),
      pct(r.validity),
      pct(r.killRate),
      String(r.mistakeBook),
      r.codeReward.toFixed(3),
      r.testReward.toFixed(3),
      r.seconds === null ? '-' : r.seconds.toFixed(1),
    ]),
  );
}

function progressBar(p: RunProgress): string {
  const width = 30;
  const done = Math.round((width * p.round) / Math.max(1, p.rounds));
  return `\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] round ${p.round}/${p.rounds}  ${p.events} events`;
}

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('run an adversarial co-evolution from a YAML config (SQLite log under runs/<run-id>/, or JetStream with --log)')
    .argument('<config>', 'YAML run config, e.g. configs/demo.yaml')
    .option('--set <key=value...>', 'override config keys (dotted paths)', [])
    .option('--seed <n>', 'override the seed', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw new UserError(`--seed ${v}: expected a non-negative integer`);
      return n;
    })
    .option('--dir <path>', 'run directory (default <config.dir>/<run-id>)')
    .option('--log <location>', 'keep the log on JetStream at nats://host:port (default: SQLite in the run directory)')
    .option('--json', 'print the table as JSON lines, one per round')
    .action(async (configPath: string, opts: { set: string[]; seed?: number; dir?: string; log?: string; json?: boolean }) => {
      if (opts.log !== undefined && !isNatsLocation(opts.log)) throw new UserError(`--log ${opts.log}: expected nats://host:port (the SQLite log is the default)`);
      // Config, dataset, log and run-directory errors become one line and an exit status in cli/errors.ts.
      const config = loadConfigFile(configPath, { overrides: opts.set, seed: opts.seed });
      const tty = process.stderr.isTTY && !opts.json;
      let outcome;
      try {
        outcome = await runExperiment({
          config,
          dir: opts.dir,
          ...(opts.log !== undefined ? { log: opts.log } : {}),
          onProgress: tty ? (p) => process.stderr.write(progressBar(p)) : undefined,
        });
      } finally {
        if (tty) process.stderr.write('\n');
      }
      if (outcome.isolation !== 'bwrap') process.stderr.write('crucible: warning: programs ran without bubblewrap (rlimits only)\n');
      if (opts.json) {
        for (const r of outcome.rows) process.stdout.write(`${JSON.stringify({ runId: outcome.runId, ...r })}\n`);
      } else {
        process.stdout.write(`run ${outcome.runId} in ${outcome.dir}${outcome.finished ? '' : ' (not finished)'}\n\n${roundTable(outcome.rows)}\n`);
      }
    });
}
