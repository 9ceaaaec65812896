import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import { openRecordedLog, resolveRunLocation, roundEnd } from '../run-location.js';
import { asPosition, type EventLog, type Position } from '../../events/log.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { KEPT_RUN_PROJECTIONS, ON_DEMAND_RUN_PROJECTIONS, RUN_PROJECTIONS } from '../../projections/run-views.js';
import { roundRows, type RoundTableState } from '../../projections/round-table.js';
import { SNAPSHOTS_FILE, VIEWS_FILE } from '../../actors/run.js';
import { removeVariantReadModels } from '../../ablation/housekeeping.js';
import { readingDerived } from '../../projections/damaged-file.js';
import { UserError } from '../errors.js';
import { roundTable } from './run.js';

function parsePosition(flag: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new UserError(`${flag} ${v}: expected a non-negative integer`);
    return n;
  };
}

async function runIdOfLog(log: EventLog, dir: string): Promise<string> {
  for await (const e of log.read({ limit: 1 }, { types: ['RunStarted'] })) return e.runId;
  throw new UserError(`${dir}: the log has no RunStarted event: not a crucible run`);
}

export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description("rebuild every read model of a run from its log and print each one's state hash")
    .argument('<run>', 'a run directory (runs/<run-id>, its log in log.db or on JetStream), or nats://host:port with --run')
    .option('--run <id>', 'the run id, for a nats:// location')
    .option('--verify', "compare with the run's live read models; exit 1 on any difference")
    .option('--until <position>', 'rebuild the state as of this log position', parsePosition('--until'))
    .option('--round <k>', 'rebuild the state as it stood after round k', parsePosition('--round'))
    .option('--out <file>', 'keep the rebuilt read models in this (new) SQLite file')
    .option(
      '--rebuild',
      "replace the run's views.db with the read models rebuilt from the log, and drop what else is derived from it (snapshots.db, the ablation variants' read models): the fix for a damaged one",
    )
    .option('--json', 'print JSON')
    .option('--creds <file>', 'credentials for a JetStream log on a cluster with auth (e.g. DIR/reader.creds.json from `crucible nats up`)')
    .action(
      async (
        dir: string,
        opts: { run?: string; verify?: boolean; until?: number; round?: number; out?: string; json?: boolean; creds?: string; rebuild?: boolean },
      ) => {
        const where = resolveRunLocation(dir, opts.run);
        if (opts.rebuild && (opts.verify || opts.until !== undefined || opts.round !== undefined || opts.out !== undefined)) {
          throw new UserError('--rebuild replaces the whole read models of the run; it cannot be combined with --verify, --until, --round or --out');
        }
        if (opts.rebuild && !where.dir) throw new UserError('--rebuild replaces the read models in a run directory: give the run directory');
        if (opts.verify && (opts.until !== undefined || opts.round !== undefined)) {
          throw new UserError('--verify compares the whole run; it cannot be combined with --until or --round');
        }
        if (opts.out && existsSync(opts.out)) throw new UserError(`--out ${opts.out}: the file exists; a replay goes into a fresh database`);
        const log = await openRecordedLog(where, opts.creds);
        const scratch = opts.out ? null : mkdtempSync(path.join(os.tmpdir(), 'crucible-replay-'));
        // Rebuilt beside the run (the rename is then within one file system), replacing views.db once whole.
        const target = opts.rebuild ? path.join(where.dir!, `${VIEWS_FILE}.rebuild-${process.pid}`) : (opts.out ?? path.join(scratch!, 'views.db'));
        let rebuiltFiles: string[] = [];
        let rebuilt: ProjectionRunner | null = null;
        let live: ProjectionRunner | null = null;
        try {
          const runId = where.runId ?? (await runIdOfLog(log, dir));
          const head = await log.head();
          const to = opts.round !== undefined ? await roundEnd(log, runId, opts.round) : opts.until !== undefined ? asPosition(opts.until) : head;
          rebuilt = await ProjectionRunner.open({ log, readModel: target, projections: RUN_PROJECTIONS, runId });
          await rebuilt.catchUp({ to });
          const hashes: Record<string, string> = {};
          for (const p of RUN_PROJECTIONS) hashes[p.name] = await rebuilt.stateHash(p.name);

          const differences: string[] = [];
          /** Read models built on demand that the run directory does not hold up to date. */
          const notCompared: string[] = [];
          if (opts.verify) {
            if (!where.dir) throw new UserError("--verify compares with a run directory's read models: give the run directory");
            const viewsPath = path.join(where.dir, VIEWS_FILE);
            if (!existsSync(viewsPath)) throw new UserError(`${dir}: no ${VIEWS_FILE}: nothing to verify against`);
            live = await readingDerived(viewsPath, where.dir, () =>
              ProjectionRunner.open({ log, readModel: viewsPath, projections: RUN_PROJECTIONS, runId, readOnly: true }),
            );
            // By content: positions are the log's own, and a run exported to another log has others.
            // A read model built on demand is compared where a reader brought it as far as the
            // read models the run keeps; short of that, it is what an earlier reader saw.
            const kept = live.checkpoint(KEPT_RUN_PROJECTIONS[0]!.name);
            for (const p of RUN_PROJECTIONS) {
              if (ON_DEMAND_RUN_PROJECTIONS.includes(p) && live.checkpoint(p.name) !== kept) {
                notCompared.push(p.name);
                continue;
              }
              const open = live;
              const hash = await readingDerived(viewsPath, where.dir, () => open.stateHash(p.name));
              if (hash !== hashes[p.name])
                differences.push(`${p.name}: live state hash ${hash.slice(0, 16)} differs from the replay's ${hashes[p.name]!.slice(0, 16)}`);
            }
          }
          const rows = roundRows(rebuilt.state<RoundTableState>('round-table'));
          if (opts.rebuild) {
            await rebuilt.close();
            rebuilt = null;
            rebuiltFiles = replaceDerived(where.dir!, target);
          }
          if (opts.json) {
            process.stdout.write(
              `${JSON.stringify({ runId, position: to, hashes, rows, ...(opts.verify ? { verified: differences.length === 0, differences, notCompared } : {}) })}\n`,
            );
          } else {
            process.stdout.write(`run ${runId} from ${where.location}: replayed up to position ${to} (head ${head})\n\n`);
            for (const [name, hash] of Object.entries(hashes)) process.stdout.write(`${name.padEnd(16)} ${hash}\n`);
            if (rows.length > 0) process.stdout.write(`\n${roundTable(rows)}\n`);
            if (opts.rebuild) process.stdout.write(`\nrebuilt from the log: ${rebuiltFiles.join(', ')}\n`);
            if (opts.verify) {
              for (const name of notCompared)
                process.stdout.write(`\n${name}: built when a report reads it, and not up to date in ${VIEWS_FILE}: not compared\n`);
              process.stdout.write(
                differences.length === 0
                  ? `\nverified: every read model ${notCompared.length ? 'compared ' : ''}equals its replay\n`
                  : `\nNOT verified:\n${differences.map((d) => `  ${d}\n`).join('')}`,
              );
            }
          }
          if (differences.length > 0) process.exitCode = 1;
        } finally {
          await live?.close();
          await rebuilt?.close();
          await log.close();
          if (scratch) rmSync(scratch, { recursive: true, force: true });
          if (opts.rebuild) removeSqlite(target);
        }
      },
    );
}

const removeSqlite = (file: string) => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
};

/** Puts the rebuilt read models in place of the run's views.db and drops the other files derived
 * from the log: the actors' snapshots (a cache: a resumed run refolds the log) and the ablation
 * variants' read models (the next `ablate` projects them again; their own execution logs stay).
 * Returns what was replaced or dropped. */
function replaceDerived(runDir: string, rebuilt: string): string[] {
  const views = path.join(runDir, VIEWS_FILE);
  removeSqlite(views);
  renameSync(rebuilt, views);
  const done = [views];
  const snapshots = path.join(runDir, SNAPSHOTS_FILE);
  if (existsSync(snapshots)) {
    removeSqlite(snapshots);
    done.push(`${snapshots} (dropped: resuming refolds the log)`);
  }
  const variants = removeVariantReadModels(runDir);
  if (variants > 0) done.push(`${variants} ablation variant file(s) (dropped: the next ablate projects them again)`);
  return done;
}
