import path from 'node:path';
import type { Command } from 'commander';
import { asPosition, type Position } from '../../events/log.js';
import { ablate, type AblationResult } from '../../ablation/ablate.js';
import { parseVariantSpec, type VariantSpec } from '../../ablation/variant.js';
import { formatTable } from '../table.js';
import { ablationTable } from '../ablation-table.js';
import { ABLATIONS_DIR, cleanAblations, listVariants, removeTemporaries } from '../../ablation/housekeeping.js';
import { openRecordedLog, resolveRunLocation, roundEnd } from '../run-location.js';
import { UserError } from '../errors.js';
import type { RunConfig } from '../../config/schema.js';
import { sandboxOptions } from '../../actors/run.js';
import { createSandbox } from '../../sandbox/index.js';

function collect(value: string, previous: VariantSpec[]): VariantSpec[] {
  return [...previous, parseVariantSpec(value)];
}

function nonNegative(flag: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new UserError(`${flag} ${v}: expected a non-negative integer`);
    return n;
  };
}

export function registerAblate(program: Command): void {
  program
    .command('ablate')
    .description('re-judge a recorded run under other settings (rewards, Mistake Book, TOPVAR, ...) and print the round tables side by side')
    .argument('<run>', 'a run directory (runs/<run-id>)')
    .option('--variant <spec>', 'NAME:key=value,... (repeatable), e.g. a0:rewards.alpha=0 or nobook:mistakeBook.enabled=false', collect, [])
    .option('--round <k>', 'stop after round k', nonNegative('--round'))
    .option('--until <position>', 'stop after this log position', nonNegative('--until'))
    .option('--execute', "run the executions a variant needs that the log lacks in a sandbox, into the variant's own log (never the run's)")
    .option('--threads <n>', 'project several variants on this many threads (default 1: measured slower on 2 cores)', nonNegative('--threads'))
    .option('--list', "list the variant files kept in the run's ablations directory, with their settings")
    .option('--clean', "remove every file ablate keeps in the run's ablations directory")
    .option('--json', 'print JSON')
    .action(
      async (
        dir: string,
        opts: { variant: VariantSpec[]; round?: number; until?: number; threads?: number; execute?: boolean; json?: boolean; list?: boolean; clean?: boolean },
      ) => {
        if (opts.round !== undefined && opts.until !== undefined) throw new UserError('give --round or --until, not both');
        const chosen = [opts.list && '--list', opts.clean && '--clean', opts.variant.length > 0 && '--variant'].filter(Boolean);
        if (chosen.length !== 1)
          throw new UserError(chosen.length === 0 ? 'give --variant NAME:key=value (repeatable), --list or --clean' : `give one of ${chosen.join(', ')}`);
        const where = resolveRunLocation(dir);
        if (!where.dir) throw new UserError(`${dir}: ablate needs a run directory (it keeps the variants' read models there)`);
        const ablations = path.join(where.dir, ABLATIONS_DIR);
        if (opts.list) return printList(ablations, opts.json === true);
        if (opts.clean) {
          const { files, bytes } = cleanAblations(ablations);
          process.stdout.write(
            opts.json ? `${JSON.stringify({ removed: files, bytes })}\n` : `removed ${files} file(s), ${(bytes / 1024).toFixed(0)} KiB, from ${ablations}\n`,
          );
          return;
        }
        const log = await openRecordedLog(where);
        // Stopped by a signal: this process's temporary files go with it (a file being built is
        // never a variant's; the next call builds it again).
        const onSignal = (signal: NodeJS.Signals) => {
          removeTemporaries(ablations, process.pid);
          process.exit(signal === 'SIGINT' ? 130 : 143);
        };
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        try {
          const runId = where.runId ?? undefined;
          let to: Position | undefined;
          if (opts.round !== undefined) to = await roundEnd(log, runId, opts.round);
          else if (opts.until !== undefined) to = asPosition(opts.until);
          const result = await ablate({
            log,
            dir: ablations,
            variants: opts.variant,
            ...(runId ? { runId } : {}),
            ...(to !== undefined ? { to } : {}),
            ...(opts.threads !== undefined ? { threads: opts.threads } : {}),
            // The sandbox the recorded run would have used (its executor settings), started only if a variant needs it.
            hashes: opts.json === true,
            ...(opts.execute ? { execute: { sandbox: (config: RunConfig) => createSandbox(sandboxOptions(config)) } } : {}),
          });
          const refused = result.variants.filter((v) => v.status === 'refused');
          if (opts.json) {
            process.stdout.write(
              `${JSON.stringify({
                runId: result.runId,
                position: result.position,
                recorded: result.recorded,
                variants: result.variants.map((v) =>
                  v.status === 'answered'
                    ? {
                        name: v.name,
                        status: v.status,
                        overrides: v.variant.overrides,
                        settingsHash: v.variant.settingsHash,
                        sameAsRecorded: v.variant.sameAsRecorded,
                        file: v.file,
                        fromStore: v.fromStore,
                        log: v.log,
                        executed: v.executed,
                        rows: v.rows,
                        hashes: v.hashes,
                      }
                    : { name: v.name, status: v.status, overrides: v.variant.overrides, setting: v.setting, reason: v.reason },
                ),
              })}\n`,
            );
          } else {
            process.stdout.write(`run ${result.runId} (${result.method}) re-judged up to position ${result.position}\n`);
            for (const v of result.variants) {
              const given = v.variant.overrides.map((o) => `${o.key}=${JSON.stringify(o.value)}`).join(', ');
              const settings = v.variant.sameAsRecorded ? `${given ? `${given}: ` : ''}the recorded settings (equal to the run's)` : given;
              process.stdout.write(
                v.status === 'answered'
                  ? `  ${v.name}: ${settings} (${v.fromStore ? 'answered from' : 'written to'} ${v.file}${v.log ? `; ${v.executed > 0 ? `${v.executed} new executions in` : 'executions in'} ${v.log}` : ''})\n`
                  : `  ${v.name}: REFUSED${v.setting ? ` (${v.setting})` : ''}: ${v.reason}\n`,
              );
            }
            process.stdout.write(`\n${ablationTable(result)}\n`);
            const own = result.variants.some((v) => v.status === 'answered' && v.log !== null)
              ? " (plus the Mistake Book replays executed into a variant's own log)"
              : '';
            process.stdout.write(
              `\nThe samples, executions and policies are the recorded ones${own}: a variant re-derives the judgement of the recorded samples.\n`,
            );
          }
          if (refused.length > 0) process.exitCode = 2;
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          await log.close();
        }
      },
    );
}

function printList(dir: string, json: boolean): void {
  const listed = listVariants(dir);
  if (json) {
    for (const v of listed) process.stdout.write(`${JSON.stringify(v)}\n`);
    return;
  }
  if (listed.length === 0) {
    process.stdout.write(`no variant files in ${dir}\n`);
    return;
  }
  process.stdout.write(
    `${formatTable(
      ['file', 'settings', 'up to position', 'KiB', 'own executions'],
      listed.map((v) => [
        path.basename(v.file),
        v.settings === null
          ? '(not recorded)'
          : v.settings.sameAsRecorded
            ? "the run's"
            : v.settings.overrides.map((o) => `${o.key}=${JSON.stringify(o.value)}`).join(', '),
        v.settings === null ? '-' : String(v.settings.position),
        (v.bytes / 1024).toFixed(0),
        v.log === null ? '-' : path.basename(v.log),
      ]),
    )}\n`,
  );
}
