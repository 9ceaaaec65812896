import { dirname, resolve } from 'node:path';
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { UserError } from '../errors.js';
import { DatasetError } from '../../datasets/errors.js';
import { describeRowError, FORMATS, getLoader, importRows, LOADERS, readSpecialJudge } from '../../datasets/loaders/index.js';
import type { LoaderOptions, RowError } from '../../datasets/loaders/types.js';
import { ProblemFileWriter, readProblemFile } from '../../datasets/problemFile.js';
import type { Problem } from '../../core/problem.js';
import { fillExpected, type OracleResult } from '../../datasets/oracle.js';
import { checkProblems, type CheckReport } from '../../datasets/check.js';
import type { Sandbox } from '../../sandbox/api.js';

interface SandboxFlags {
  python: string;
  isolation: string;
  workers?: string;
}

interface ImportFlags extends SandboxFlags {
  out: string;
  source?: string;
  spj?: string;
  timeLimit?: string;
  memoryLimit?: string;
  oracle?: boolean;
  quiet?: boolean;
}

interface CheckFlags extends SandboxFlags {
  solutions: string;
  incorrect: string;
  json?: boolean;
}

const positive = (v: string | undefined, flag: string, integer = false): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n)) || (!integer && n === 0)) {
    throw new UserError(`${flag} must be a ${integer ? 'non-negative integer' : 'positive number'}, got "${v}"`);
  }
  return n;
};

const write = (line: string) => process.stdout.write(`${line}\n`);
const warn = (line: string) => process.stderr.write(`${line}\n`);

/** The sandbox is loaded only for the commands that run programs. */
async function openSandbox(o: SandboxFlags): Promise<Sandbox> {
  if (!['auto', 'bwrap', 'none'].includes(o.isolation)) throw new UserError('--isolation must be auto, bwrap or none');
  const { createSandbox } = await import('../../sandbox/index.js');
  return createSandbox({
    pythonPath: o.python,
    isolation: o.isolation as 'auto' | 'bwrap' | 'none',
    workers: positive(o.workers, '--workers', true),
  });
}

function oracleNotes(r: OracleResult): string[] {
  const lines: string[] = [];
  if (r.skipped) lines.push(`${r.problem.id}: oracle skipped: ${r.skipped}`);
  for (const d of r.dropped) lines.push(`${r.problem.id}: ${d.bucket} test ${d.index} dropped: ${d.reason}`);
  for (const u of r.unfilled) lines.push(`${r.problem.id}: ${u.bucket} test ${u.index} left without expected value: ${u.reason}`);
  return lines;
}

/** The paths as one phrase, for the summary lines. */
const describePaths = (paths: readonly string[]): string => (paths.length === 1 ? paths[0]! : `${paths.length} files (${paths[0]} ... ${paths.at(-1)})`);

async function runImport(format: string, paths: string[], o: ImportFlags): Promise<void> {
  const loader = getLoader(format);
  for (const path of paths) if (!existsSync(path)) throw new UserError(`dataset not found: ${path}`);
  const outDir = dirname(resolve(o.out));
  if (!existsSync(outDir)) throw new UserError(`output folder does not exist: ${outDir}`);
  const options: LoaderOptions = {
    source: o.source,
    defaultLimits: {
      ...(o.timeLimit ? { timeSeconds: positive(o.timeLimit, '--time-limit') } : {}),
      ...(o.memoryLimit ? { memoryMb: positive(o.memoryLimit, '--memory-limit') } : {}),
    },
  };
  if (o.spj) {
    try {
      options.specialJudge = await readSpecialJudge(o.spj);
    } catch (err) {
      if (err instanceof DatasetError) throw new UserError(`--spj: ${err.message}`);
      throw err;
    }
  }
  const source = o.source ?? loader.defaultSource;
  const sandbox = o.oracle ? await openSandbox(o) : undefined;
  const out = await ProblemFileWriter.open(o.out, { crucible: 'problems', v: 1, source, format, ...(o.oracle ? { oracle: true } : {}) });
  const errors: RowError[] = [];
  let filled = 0;
  let dropped = 0;
  // Oracle runs go in small batches so that the sandbox's servers stay busy; order is kept.
  const batch: Problem[] = [];
  const flush = async () => {
    const results = await Promise.all(batch.splice(0).map((p) => fillExpected(p, sandbox!)));
    for (const r of results) {
      filled += r.filled;
      dropped += r.dropped.length;
      if (!o.quiet) oracleNotes(r).forEach(warn);
      await out.write(r.problem);
    }
  };
  try {
    for await (const item of importRows(format, paths, options)) {
      if (!item.ok) {
        errors.push(item.error);
        if (!o.quiet) warn(`skipped ${describeRowError(item.error)}`);
        continue;
      }
      if (!sandbox) {
        await out.write(item.problem);
        continue;
      }
      batch.push(item.problem);
      if (batch.length >= 4) await flush();
    }
    if (sandbox) await flush();
    if (out.count === 0) {
      await out.abort();
      throw new UserError(`no problem could be imported from ${describePaths(paths)} as ${format} (${errors.length} rows skipped)`, 1);
    }
    await out.close();
  } catch (err) {
    await out.abort();
    throw err;
  } finally {
    await sandbox?.close();
  }
  const oracleText = sandbox ? `; oracle filled ${filled} expected values, dropped ${dropped} tests` : '';
  write(`imported ${out.count} problems (${format}, source ${source}) into ${o.out}; skipped ${errors.length} rows${oracleText}`);
}

function printReport(r: CheckReport): void {
  write(`checked ${r.checked} of ${r.problems} problems (${r.skipped.length} skipped)`);
  write(`problems whose references fail: ${new Set(r.failingReferences.map((f) => f.id)).size}`);
  for (const f of r.failingReferences) {
    const first = f.failures[0]!;
    const detail = `${first.bucket} test ${first.index}: ${first.verdict}${first.exceptionType ? ` ${first.exceptionType}` : ''}`;
    write(`  ${f.id} solution ${f.solution}: ${f.failed} failing tests (first: ${detail})`);
  }
  write(`incorrect solutions that pass: ${r.passingIncorrect.length}`);
  for (const p of r.passingIncorrect) write(`  ${p.id} incorrect solution ${p.solution}`);
  if (r.inconclusive.length) {
    write(`inconclusive (sandbox errors, not verdicts): ${r.inconclusive.length}`);
    for (const i of r.inconclusive) write(`  ${i.id}: ${i.reason}`);
  }
  if (r.skipped.length) {
    write('skipped:');
    for (const s of r.skipped) write(`  ${s.id}: ${s.reason}`);
  }
}

async function runCheck(file: string, o: CheckFlags): Promise<void> {
  const pf = await readProblemFile(file);
  for (const e of pf.errors) warn(`${file}:${e.line}: skipped: ${e.reason}`);
  const sandbox = await openSandbox(o);
  let report: CheckReport;
  try {
    report = await checkProblems(pf.problems, sandbox, {
      solutions: positive(o.solutions, '--solutions', true),
      incorrect: positive(o.incorrect, '--incorrect', true),
      concurrency: 2,
    });
  } finally {
    await sandbox.close();
  }
  if (o.json) write(JSON.stringify(report));
  else printReport(report);
  // Non-zero when the data has problems, so CI can gate on a dataset.
  if (report.failingReferences.length > 0 || report.passingIncorrect.length > 0 || pf.errors.length > 0) process.exitCode = 1;
}

const sandboxOptions = (c: Command): Command =>
  c
    .option('--python <path>', 'interpreter the programs run under', '/usr/bin/python3')
    .option('--isolation <mode>', 'auto | bwrap | none', 'auto')
    .option('--workers <n>', 'sandbox fork-servers (default: cores)');

export function registerData(program: Command): void {
  const data = program.command('data').description('import benchmark datasets into problem files, and check them');

  data
    .command('formats')
    .description('list the dataset formats `data import` reads')
    .action(() => {
      for (const f of FORMATS) write(`${f.padEnd(16)} ${LOADERS[f]!.description}`);
    });

  sandboxOptions(
    data
      .command('import')
      .description('convert a dataset (a file, Parquet shards, or an APPS folder) into a problem file; bad rows are reported and skipped')
      .argument('<format>', `one of: ${FORMATS.join(', ')}`)
      .argument(
        '<paths...>',
        'dataset file (.jsonl, .jsonl.gz, .json, .parquet), Parquet shards of one split in order (data/train-*.parquet), a folder of them, or, for apps, a problem folder',
      )
      .requiredOption('--out <file>', 'problem file to write (JSON lines)')
      .option('--source <name>', 'source label and id prefix (default: the format name)')
      .option('--spj <file>', "taco: TACO's output_spj.jsonl, marks problems that need a checker")
      .option('--time-limit <seconds>', 'time limit for rows that state none')
      .option('--memory-limit <mb>', 'memory limit for rows that state none')
      .option('--oracle', 'fill expected values of input-only tests by running the reference solution')
      .option('--quiet', 'do not list skipped rows'),
  ).action((format: string, paths: string[], o: ImportFlags) => runImport(format, paths, o));

  sandboxOptions(
    data
      .command('check')
      .description('run references and incorrect solutions on their tests; report failing references and passing incorrect ones')
      .argument('<file>', 'problem file written by `crucible data import`')
      .option('--solutions <n>', 'reference solutions to run per problem', '3')
      .option('--incorrect <n>', 'incorrect solutions to run per problem', '5')
      .option('--json', 'print the report as one JSON object'),
  ).action((file: string, o: CheckFlags) => runCheck(file, o));
}
