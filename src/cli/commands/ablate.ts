import path from 'node:path';
import type { Command } from 'commander';
import { asPosition, type Position } from '../../events/log.js';
import type { RoundRow } from '../../projections/round-table.js';
import { ablate, type AblationResult } from '../../ablation/ablate.js';
import { parseVariantSpec, type VariantSpec } from '../../ablation/variant.js';
import { formatTable } from '../table.js';
import { openRecordedLog, resolveRunLocation, roundEnd } from '../run-location.js';
import { UserError } from '../errors.js';
import type { RunConfig } from '../../config/schema.js';
import { sandboxOptions } from '../../actors/run.js';
import { createSandbox } from '../../sandbox/index.js';

/** Variant read models live beside the run's own: <run>/ablations/<name>-<key>.db. */
export const ABLATIONS_DIR = 'ablations';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const pctOrDash = (x: number | null) => (x === null ? '-' : pct(x));

/** Per round, the recorded row and one row per answered variant: the run's round-table columns. */
export function ablationTable(result: AblationResult): string {
  const columns: [string, RoundRow[]][] = [['recorded', result.recorded]];
  for (const v of result.variants) if (v.status === 'answered') columns.push([v.name, v.rows]);
  const rows: string[][] = [];
  for (const r of result.recorded) {
    for (const [name, rs] of columns) {
      const x = rs.find((y) => y.round === r.round);
      if (!x) continue;
      rows.push([
        String(r.round),
        name,
        pct(x.heldOutPass),
        pctOrDash(x.exactCorrect),
        pctOrDash(x.validity),
        pctOrDash(x.exactValid),
        pctOrDash(x.killRate),
        x.mistakeBook === null ? '-' : String(x.mistakeBook),
        x.codeReward.toFixed(3),
        x.testReward === null ? '-' : x.testReward.toFixed(3),
        x.seconds === null ? '-' : x.seconds.toFixed(1),
      ]);
    }
  }
  return formatTable(
    ['round', 'variant', 'held-out pass', 'P(correct)', 'test validity', 'P(valid test)', 'kill rate', 'mistake book', 'code reward', 'test reward', 'seconds'],
    rows,
  );
}

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
    .requiredOption('--variant <spec>', 'NAME:key=value,... (repeatable), e.g. a0:rewards.alpha=0 or nobook:mistakeBook.enabled=false', collect, [])
    .option('--round <k>', 'stop after round k', nonNegative('--round'))
    .option('--until <position>', 'stop after this log position', nonNegative('--until'))
    .option('--execute', "run the executions a variant needs that the log lacks in a sandbox, into the variant's own log (never the run's)")
    .option('--threads <n>', 'project several variants on this many threads (default 1: measured slower on 2 cores)', nonNegative('--threads'))
    .option('--json', 'print JSON')
    .action(async (dir: string, opts: { variant: VariantSpec[]; round?: number; until?: number; threads?: number; execute?: boolean; json?: boolean }) => {
      if (opts.round !== undefined && opts.until !== undefined) throw new UserError('give --round or --until, not both');
      const where = resolveRunLocation(dir);
      if (!where.dir) throw new UserError(`${dir}: ablate needs a run directory (it keeps the variants' read models there)`);
      const log = await openRecordedLog(where);
      try {
        const runId = where.runId ?? undefined;
        let to: Position | undefined;
        if (opts.round !== undefined) to = await roundEnd(log, runId, opts.round);
        else if (opts.until !== undefined) to = asPosition(opts.until);
        const result = await ablate({ log, dir: path.join(where.dir, ABLATIONS_DIR), variants: opts.variant, ...(runId ? { runId } : {}), ...(to !== undefined ? { to } : {}), ...(opts.threads !== undefined ? { threads: opts.threads } : {}),
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
                  ? { name: v.name, status: v.status, overrides: v.variant.overrides, settingsHash: v.variant.settingsHash, file: v.file, fromStore: v.fromStore, log: v.log, executed: v.executed, rows: v.rows, hashes: v.hashes }
                  : { name: v.name, status: v.status, overrides: v.variant.overrides, setting: v.setting, reason: v.reason },
              ),
            })}\n`,
          );
        } else {
          process.stdout.write(`run ${result.runId} (${result.method}) re-judged up to position ${result.position}\n`);
          for (const v of result.variants) {
            const settings = v.variant.overrides.map((o) => `${o.key}=${JSON.stringify(o.value)}`).join(', ') || 'the recorded settings';
            process.stdout.write(
              v.status === 'answered'
                ? `  ${v.name}: ${settings} (${v.fromStore ? 'answered from' : 'written to'} ${v.file}${v.log ? `; ${v.executed > 0 ? `${v.executed} new executions in` : 'executions in'} ${v.log}` : ''})\n`
                : `  ${v.name}: REFUSED${v.setting ? ` (${v.setting})` : ''}: ${v.reason}\n`,
            );
          }
          process.stdout.write(`\n${ablationTable(result)}\n`);
          const own = result.variants.some((v) => v.status === 'answered' && v.log !== null) ? " (plus the Mistake Book replays executed into a variant's own log)" : '';
          process.stdout.write(`\nThe samples, executions and policies are the recorded ones${own}: a variant re-derives the judgement of the recorded samples.\n`);
        }
        if (refused.length > 0) process.exitCode = 2;
      } finally {
        await log.close();
      }
    });
}
