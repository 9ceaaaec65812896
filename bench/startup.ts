/**
 * Start-up time of the `crucible` command: `crucible --version`, and `crucible runs` over a
 * folder of 20 runs, each run from the compiled build in dist/ and from the TypeScript sources
 * through tsx (CRUCIBLE_FROM_SOURCES=1), beside `node -e 0` (the floor: starting node itself),
 * all measured in this run. Wall time of each process, repeated (the commands taking turns),
 * median and min, and its CPU time (user + system, from the children's times in /proc/self/stat,
 * in 10 ms ticks): on a shared machine wall time grows with the load, CPU time much less.
 *
 * The 20 runs are copies of one small demo run made here (two problems, two rounds), unless
 * `--runs DIR` names a folder of runs.
 *
 *   npm run bench -- startup [--repeat 7] [--runs DIR]
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfigFile } from '../src/config/load.js';
import { runExperiment } from '../src/actors/run.js';
import { PACKAGE_ROOT } from '../src/core/package-root.js';
import { pathToFileURL } from 'node:url';
import { flag } from './flags.js';

const RUNS = 20;
const BIN = path.join(PACKAGE_ROOT, 'bin/crucible.js');

/** 20 copies of one small demo run in a scratch folder. */
async function makeRuns(scratch: string): Promise<string> {
  const overrides = [
    'rounds=2',
    'dataset.limit=2',
    'sampling.problemsPerRound=2',
    'sampling.groupSize=4',
    'policies.code.mutants=2',
    'policies.test.candidates=12',
    `dir=${path.join(scratch, 'made')}`,
  ];
  const config = loadConfigFile(path.join(PACKAGE_ROOT, 'configs', 'demo.yaml'), { overrides });
  const outcome = await runExperiment({ config, cacheDir: path.join(scratch, 'cache') });
  const runs = path.join(scratch, 'runs');
  for (let i = 0; i < RUNS; i++) cpSync(outcome.dir, path.join(runs, `${path.basename(outcome.dir)}-${String(i).padStart(2, '0')}`), { recursive: true });
  return runs;
}

interface Case {
  label: string;
  args: string[];
  env?: Record<string, string>;
}

/** CPU seconds of this process's children that have exited (cutime + cstime; Linux's 100 Hz
 * clock ticks), or NaN where /proc is absent. */
function childrenCpu(): number {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Wall and CPU seconds of one process, from spawn to exit; throws when it fails. */
function timed(c: Case): { wall: number; cpu: number } {
  const cpu = childrenCpu();
  const t = performance.now();
  const r = spawnSync(process.execPath, c.args, { env: { ...process.env, ...c.env }, encoding: 'utf8', cwd: PACKAGE_ROOT });
  const wall = (performance.now() - t) / 1000;
  if (r.status !== 0) throw new Error(`${c.label}: exit status ${r.status}: ${r.stderr}`);
  return { wall, cpu: childrenCpu() - cpu };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export async function runBench(args: string[]): Promise<void> {
  const repeat = flag(args, 'repeat', 7);
  // The rule bin/crucible.js applies (a script beside the sources, not compiled with them).
  const { staleness } = (await import(pathToFileURL(path.join(PACKAGE_ROOT, 'scripts/compiled.js')).href)) as { staleness(root: string): string | null };
  const stale = staleness(PACKAGE_ROOT);
  if (stale !== null) throw new Error(`${stale}: run \`npm run build\` first (this benchmark compares the build with the sources)`);
  const given = args.indexOf('--runs') >= 0 ? args[args.indexOf('--runs') + 1] : undefined;
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-startup-'));
  try {
    const runs = given ?? (await makeRuns(scratch));
    const count = readdirSync(runs).length;
    const fromSources = { CRUCIBLE_FROM_SOURCES: '1' };
    const cases: Case[] = [
      { label: 'node -e 0', args: ['-e', '0'] },
      { label: 'crucible --version (dist/)', args: [BIN, '--version'] },
      { label: `crucible runs, ${count} runs (dist/)`, args: [BIN, 'runs', runs] },
      { label: 'crucible --version (sources, tsx)', args: [BIN, '--version'], env: fromSources },
      { label: `crucible runs, ${count} runs (sources, tsx)`, args: [BIN, 'runs', runs], env: fromSources },
    ];
    // One untimed pass fills the page cache and tsx's transform cache, as a user's second
    // command finds them.
    for (const c of cases) timed(c);
    const times = cases.map(() => [] as { wall: number; cpu: number }[]);
    for (let i = 0; i < repeat; i++) cases.forEach((c, j) => times[j]!.push(timed(c)));
    const width = Math.max(...cases.map((c) => c.label.length));
    console.log(`${'command'.padEnd(width)}  wall s: median    min  CPU s: median   (${repeat} runs each; load average ${os.loadavg()[0]!.toFixed(1)})`);
    cases.forEach((c, j) => {
      const wall = times[j]!.map((t) => t.wall);
      const cpu = median(times[j]!.map((t) => t.cpu));
      console.log(`${c.label.padEnd(width)}  ${median(wall).toFixed(3).padStart(13)}  ${Math.min(...wall).toFixed(3)}  ${cpu.toFixed(2).padStart(13)}`);
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
