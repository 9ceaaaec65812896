/**
 * `crucible evolved <run-dir> --out <file>`: the dataset an EvolveCoder run evolved, as a problem
 * file: each problem the final filter kept, with its evolved tests as generated tests. A demo
 * run reads it back with `dataset: { format: demo, path: <file> }` (configs/evolvecoder-rl.yaml).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { openSqliteLog } from '../../events/sqlite/sqlite-log.js';
import type { EventData } from '../../events/catalog.js';
import { LOG_FILE } from '../../actors/run.js';
import { Problem, TestCase } from '../../core/problem.js';
import { writeProblemFile } from '../../datasets/problemFile.js';
import { UserError } from '../errors.js';

export async function exportEvolved(runDir: string, out: string): Promise<{ problems: number; tests: number; dropped: number }> {
  const file = path.join(runDir, LOG_FILE);
  if (!existsSync(file)) throw new UserError(`${runDir}: no ${LOG_FILE}: not a run directory`);
  const log = await openSqliteLog(file, { create: false, readOnly: true });
  try {
    let problems: EventData<'RunStarted'>['problems'] = [];
    const evolved = new Map<string, EventData<'DatasetEvolved'>>();
    for await (const e of log.read({}, { types: ['RunStarted', 'DatasetEvolved'] })) {
      if (e.type === 'RunStarted') problems = (e.data as EventData<'RunStarted'>).problems;
      else evolved.set((e.data as EventData<'DatasetEvolved'>).problemId, e.data as EventData<'DatasetEvolved'>);
    }
    if (evolved.size === 0) throw new UserError(`${runDir}: the log has no DatasetEvolved event: not a finished evolvecoder run`);
    const kept: Problem[] = [];
    let tests = 0;
    for (const ref of problems) {
      const d = evolved.get(ref.problemId);
      if (!d?.keepProblem) continue;
      const problem = Problem.parse(JSON.parse(await log.blobs.getText(ref.problemHash)));
      const generated = [];
      for (const h of d.tests) generated.push(TestCase.parse(JSON.parse(await log.blobs.getText(h))));
      tests += generated.length;
      kept.push({ ...problem, tests: { ...problem.tests, generated } });
    }
    await writeProblemFile(out, { crucible: 'problems', v: 1, source: `evolvecoder-run:${path.basename(runDir)}`, format: 'evolvecoder-run' }, kept);
    return { problems: kept.length, tests, dropped: evolved.size - kept.length };
  } finally {
    await log.close();
  }
}

export function registerEvolved(program: Command): void {
  program
    .command('evolved')
    .description('write the tests an evolvecoder run evolved as a problem file')
    .argument('<run-dir>', 'an evolvecoder run directory, e.g. runs/<run-id>')
    .requiredOption('--out <file>', 'the problem file to write')
    .action(async (runDir: string, opts: { out: string }) => {
      const r = await exportEvolved(runDir, opts.out);
      process.stdout.write(`${opts.out}: ${r.problems} problems, ${r.tests} evolved tests (${r.dropped} problems dropped by the final filter)\n`);
    });
}
