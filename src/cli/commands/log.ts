import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { LOG_FILE } from '../../actors/run.js';
import { EventLogError } from '../../events/errors.js';
import type { EventLog } from '../../events/log.js';
import { isNatsLocation, openRunLog } from '../../events/open-log.js';
import { copyRun, runIdOfLog, type CopyReport } from '../../events/transfer.js';
import { UserError } from '../errors.js';
import { resolveRunLocation } from '../run-location.js';

async function transfer(fromWhere: string, toWhere: string, runIdOpt: string | undefined, credsFile: string | undefined): Promise<CopyReport> {
  const from = resolveRunLocation(fromWhere, runIdOpt);
  let source: EventLog | null = null;
  let target: EventLog | null = null;
  try {
    // The credentials are for the JetStream side of the copy.
    const creds = (location: string) => (credsFile !== undefined && isNatsLocation(location) ? { credsFile } : {});
    source = await openRunLog(from.location, from.runId ?? '', { create: false, ...creds(from.location) });
    const runId = from.runId ?? (await runIdOfLog(source));
    if (!runId) throw new UserError(`${fromWhere}: the log has no RunStarted event: not a crucible run`);
    let toLocation = toWhere;
    if (!isNatsLocation(toWhere)) {
      mkdirSync(toWhere, { recursive: true });
      toLocation = path.join(toWhere, LOG_FILE);
    }
    target = await openRunLog(toLocation, runId, creds(toLocation));
    return await copyRun(source, target, runId);
  } catch (err) {
    if (err instanceof EventLogError) throw new UserError(err.message);
    throw err;
  } finally {
    await source?.close();
    await target?.close();
  }
}

function print(report: CopyReport, to: string): void {
  process.stdout.write(
    `run ${report.runId}: ${report.commits} commits (${report.duplicates} already there), ${report.events} events, ` +
      `${report.blobs} blobs copied to ${to}\n`,
  );
}

export function registerLog(program: Command): void {
  const log = program.command('log').description('move a run between logs (JetStream <-> SQLite), blobs included');
  log
    .command('export')
    .description('copy a run out of a log (e.g. JetStream) into a run directory (SQLite log.db)')
    .requiredOption('--from <where>', 'nats://host:port (with --run) or a run directory')
    .option('--run <id>', 'the run id (needed for a nats:// source)')
    .requiredOption('--to <dir>', 'the run directory to write log.db into')
    .option('--creds <file>', 'credentials for a cluster with auth (e.g. DIR/reader.creds.json)')
    .action(async (opts: { from: string; run?: string; to: string; creds?: string }) => {
      if (isNatsLocation(opts.to)) throw new UserError('--to: export writes a run directory; use `crucible log import` to copy into JetStream');
      print(await transfer(opts.from, opts.to, opts.run, opts.creds), opts.to);
    });
  log
    .command('import')
    .description('copy a run from a run directory (SQLite) into JetStream')
    .requiredOption('--from <dir>', 'the run directory')
    .requiredOption('--to <url>', 'nats://host:port')
    .option('--creds <file>', 'credentials for a cluster with auth (DIR/admin.creds.json: an import writes every stream)')
    .action(async (opts: { from: string; to: string; creds?: string }) => {
      if (!isNatsLocation(opts.to)) throw new UserError(`--to ${opts.to}: expected a nats:// location`);
      print(await transfer(opts.from, opts.to, undefined, opts.creds), opts.to);
    });
}
