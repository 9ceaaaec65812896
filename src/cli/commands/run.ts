import type { Command } from 'commander';
import { loadConfigFile } from '../../config/load.js';
import { runExperiment, runIdOf, type RunOutcome } from '../../actors/run.js';
import { ProgressReporter, resumeLine } from '../progress.js';
import type { RoundRow } from '../../projections/round-table.js';
import { UserError } from '../errors.js';
import { isNatsLocation } from '../../events/open-log.js';
import { formatTable } from '../table.js';
import { summarizeSeeds, type Spread, type SummaryRow } from '../seed-summary.js';
import type { RunConfig } from '../../config/schema.js';
import { parseWorkerCounts, type WorkerRole } from '../../workers/roles.js';
import { runWithWorkers } from '../../workers/run-workers.js';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const pctOrDash = (x: number | null) => (x === null ? '-' : pct(x));

export function roundTable(rows: readonly RoundRow[]): string {
  return formatTable(
    ['round', 'held-out pass', 'P(correct)', 'test validity', 'P(valid test)', 'kill rate', 'mistake book', 'code reward', 'test reward', 'seconds'],
    rows.map((r) => [
      String(r.round),
      pct(r.heldOutPass),
      pctOrDash(r.exactCorrect),
      pctOrDash(r.validity),
      pctOrDash(r.exactValid),
      pctOrDash(r.killRate),
      r.mistakeBook === null ? '-' : String(r.mistakeBook),
      r.codeReward.toFixed(3),
      r.testReward === null ? '-' : r.testReward.toFixed(3),
      r.seconds === null ? '-' : r.seconds.toFixed(1),
    ]),
  );
}

/** The exact figures of the policies the last step made (never sampled from). */
export function trainedLine(rows: readonly RoundRow[]): string {
  const last = rows.at(-1);
  if (!last || last.trainedCorrect === null || last.trainedValid === null) return '';
  return `after the last step: P(correct) ${pct(last.trainedCorrect)}, P(valid test) ${pct(last.trainedValid)}\n`;
}

const spreadPct = (s: Spread | undefined) => (s ? `${(100 * s.mean).toFixed(1)} [${(100 * s.min).toFixed(1)}, ${(100 * s.max).toFixed(1)}]` : '-');
const spreadNum = (s: Spread | undefined, digits: number) => (s ? `${s.mean.toFixed(digits)} [${s.min.toFixed(digits)}, ${s.max.toFixed(digits)}]` : '-');

/** Mean [min, max] over seeds, percentages for rates. */
export function seedTable(rows: readonly SummaryRow[]): string {
  return formatTable(
    ['round', 'held-out pass %', 'P(correct) %', 'test validity %', 'P(valid test) %', 'kill rate %', 'mistake book', 'code reward', 'test reward'],
    rows.map((r) => [
      String(r.round),
      spreadPct(r.columns.heldOutPass),
      spreadPct(r.columns.exactCorrect),
      spreadPct(r.columns.validity),
      spreadPct(r.columns.exactValid),
      spreadPct(r.columns.killRate),
      spreadNum(r.columns.mistakeBook, 1),
      spreadNum(r.columns.codeReward, 3),
      spreadNum(r.columns.testReward, 3),
    ]),
  );
}

function seedTrainedLine(rows: readonly SummaryRow[]): string {
  const last = rows.at(-1);
  if (!last?.columns.trainedCorrect || !last.columns.trainedValid) return '';
  return `after the last step: P(correct) ${spreadPct(last.columns.trainedCorrect)}, P(valid test) ${spreadPct(last.columns.trainedValid)}\n`;
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
    .option(
      '--seeds <n>',
      'run seeds seed..seed+n-1 one after another (each its own run directory; with --workers each as worker processes) and print mean and spread over them',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UserError(`--seeds ${v}: expected a positive integer`);
        return n;
      },
    )
    .option('--dir <path>', 'run directory (default <config.dir>/<run-id>)')
    .option('--log <location>', 'keep the log on JetStream at nats://host:port (default: SQLite in the run directory)')
    .option(
      '--creds <file>',
      'credentials for a JetStream log on a cluster with auth (DIR/admin.creds.json from `crucible nats up`: one process runs every role)',
    )
    .option('--workers <spec>', 'with --log nats://...: every role as its own worker processes, e.g. executor=2,judge=1 (roles not named run one)')
    .option('--json', 'print the table as JSON lines, one per round')
    .option(
      '--snapshot-every <n>',
      "store each actor's state every n folded events, so that a resumed run folds only what came after (0: none; default 20000)",
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0) throw new UserError(`--snapshot-every ${v}: expected a non-negative integer`);
        return n;
      },
    )
    .action(
      async (
        configPath: string,
        opts: {
          set: string[];
          seed?: number;
          seeds?: number;
          dir?: string;
          log?: string;
          creds?: string;
          json?: boolean;
          snapshotEvery?: number;
          workers?: string;
        },
      ) => {
        if (opts.log !== undefined && !isNatsLocation(opts.log))
          throw new UserError(`--log ${opts.log}: expected nats://host:port (the SQLite log is the default)`);
        if (opts.creds !== undefined && opts.log === undefined) throw new UserError('--creds is for a log on JetStream: give --log nats://host:port too');
        if (opts.workers !== undefined && opts.log === undefined)
          throw new UserError('--workers: worker processes share a JetStream log; add --log nats://host:port');
        const counts = opts.workers === undefined ? undefined : parseWorkerCounts(opts.workers);
        // Config, dataset, log and run-directory errors become one line and an exit status in cli/errors.ts.
        const config = loadConfigFile(configPath, { overrides: opts.set, seed: opts.seed });
        if (opts.seeds !== undefined) {
          if (opts.dir !== undefined) throw new UserError("--dir names one run directory; with --seeds each seed gets its own under the config's dir");
          const json = opts.json === true;
          await runSeeds(config, opts.seeds, json, (c, label) =>
            counts !== undefined
              ? runWorkers(c, undefined, json, opts.log!, counts, opts.creds, label)
              : runOne(c, undefined, json, label, opts.log, opts.snapshotEvery, opts.creds),
          );
          return;
        }
        const outcome =
          counts !== undefined
            ? await runWorkers(config, opts.dir, opts.json === true, opts.log!, counts, opts.creds)
            : await runOne(config, opts.dir, opts.json === true, '', opts.log, opts.snapshotEvery, opts.creds);
        if (opts.json) {
          for (const r of outcome.rows) process.stdout.write(`${JSON.stringify({ runId: outcome.runId, ...r })}\n`);
        } else {
          process.stdout.write(
            `run ${outcome.runId} in ${outcome.dir}${outcome.finished ? '' : ' (not finished)'}\n\n${roundTable(outcome.rows)}\n${trainedLine(outcome.rows)}`,
          );
        }
      },
    );
}

async function runOne(config: RunConfig, dir: string | undefined, json: boolean, label: string, log?: string, snapshotEvery?: number, credsFile?: string) {
  const tty = process.stderr.isTTY && !json;
  // Without a terminal, plain lines (a log file or a pipe still sees the run move).
  const reporter = new ProgressReporter(tty, (text) => process.stderr.write(text), label);
  let outcome;
  try {
    outcome = await runExperiment({
      config,
      dir,
      ...(log !== undefined ? { log } : {}),
      ...(credsFile !== undefined ? { credsFile } : {}),
      ...(snapshotEvery !== undefined ? { snapshotEvery } : {}),
      // A refused snapshot costs time, not results: say why, and go on.
      onRestart: (r) => {
        if (r.refused) process.stderr.write(`crucible: ${r.refused.message}\n`);
        if (r.ignored) process.stderr.write(`crucible: ${r.actor}: ${r.ignored}\n`);
      },
      onResume: (r) => process.stderr.write(resumeLine(runIdOf(config), r)),
      onProgress: (p) => reporter.report(p, Date.now()),
      onNotice: (line) => process.stderr.write(`crucible: warning: ${line}\n`),
    });
  } finally {
    if (tty) process.stderr.write('\n');
  }
  if (outcome.isolation !== 'bwrap') process.stderr.write('crucible: warning: programs ran without bubblewrap (rlimits only)\n');
  return outcome;
}

async function runWorkers(
  config: RunConfig,
  dir: string | undefined,
  json: boolean,
  location: string,
  counts: Record<WorkerRole, number>,
  credsFile?: string,
  label = '',
) {
  const tty = process.stderr.isTTY && !json;
  const reporter = new ProgressReporter(tty, (text) => process.stderr.write(text), label);
  let outcome;
  try {
    outcome = await runWithWorkers({
      config,
      ...(dir !== undefined ? { dir } : {}),
      location,
      counts,
      ...(credsFile !== undefined ? { credsFile } : {}),
      onProgress: (p) => reporter.report(p, Date.now()),
      say: (line) => process.stderr.write(`${tty ? '\n' : ''}crucible: ${line}\n`),
    });
  } finally {
    if (tty) process.stderr.write('\n');
  }
  if (outcome.isolation !== 'bwrap') process.stderr.write('crucible: warning: programs ran without bubblewrap (rlimits only)\n');
  return outcome;
}

/** Seeds one after another (each run is already parallel inside: in one process or as worker
 * processes, as `runSeed` runs it); a seed's run that does not finish is an error, since a mean
 * over unfinished runs would mislead. */
async function runSeeds(config: RunConfig, seeds: number, json: boolean, runSeed: (config: RunConfig, label: string) => Promise<RunOutcome>): Promise<void> {
  const runs: RoundRow[][] = [];
  const ids: string[] = [];
  for (let k = 0; k < seeds; k++) {
    const seed = config.seed + k;
    const outcome = await runSeed({ ...config, seed }, `  seed ${seed} (${k + 1}/${seeds})`);
    if (!outcome.finished) throw new Error(`seed ${seed}: run ${outcome.runId} did not finish`);
    runs.push(outcome.rows);
    ids.push(outcome.runId);
  }
  const summary = summarizeSeeds(runs);
  if (json) {
    for (const r of summary) process.stdout.write(`${JSON.stringify({ runIds: ids, ...r })}\n`);
    return;
  }
  process.stdout.write(
    `${config.name}: seeds ${config.seed}..${config.seed + seeds - 1} (runs ${ids.join(', ')})\nmean [min, max] over seeds\n\n${seedTable(summary)}\n${seedTrainedLine(summary)}`,
  );
}
