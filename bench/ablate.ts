/**
 * Ablation by re-projection on the demo run, or on a log of `bench scale`'s shape (--scale F: the
 * same run as `npm run bench -- scale --fraction F`): one variant against four together (one read
 * of the log fanned out to every variant), and a second call answered from the variants' files.
 * Baseline in the same run: one variant at the same settings, and reading and decoding the whole
 * log once, the floor of any variant;
 * four variants are also measured projected on 2 piscina threads, and as four separate calls.
 * The demo run is made once (about two minutes on 2 cores) and kept under the OS temp dir, or
 * given with --run; so is the scale log (--scale 0.005: one step, about 5 minutes on 2 cores).
 * On the scale log the threaded and four-call figures are left out (they add minutes).
 *
 *   npm run bench -- ablate [--run runs/<demo-run-id> | --scale 0.005] [--repeat 3]
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfigFile } from '../src/config/load.js';
import { runExperiment, runIdOf } from '../src/actors/run.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { ablate, type AblationResult } from '../src/ablation/ablate.js';
import { parseVariantSpec } from '../src/ablation/variant.js';
import { InstantVerdictsForBenchmark } from './orchestration.js';
import { standInRun } from './scale-policy.js';
import { scaleConfig } from './scale.js';

const FOUR = ['a0:rewards.alpha=0', 'a1:rewards.alpha=1', 'nobook:mistakeBook.enabled=false', 'popstd:rewards.std=population'];

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? undefined : args[i + 1];
}

/** A run of bench scale's shape (256 problems x 8 programs x 8 suites x 8 tests per step, stand-in
 * policy and verdicts) for `fraction` of a 15M-result run, made once and kept. */
async function scaleRun(fraction: number): Promise<string> {
  const problems = 256;
  const base = path.join(os.tmpdir(), 'crucible-bench-ablate', `scale-${fraction}`);
  const { config, steps } = scaleConfig(fraction, problems, base);
  const dir = path.join(base, runIdOf(config));
  if (!existsSync(path.join(dir, 'views.db'))) {
    process.stdout.write(`making a scale log (${steps} step(s) of ${problems} problems) in ${dir} (once)...\n`);
    const out = await runExperiment({ config, dir, cacheDir: null, sandbox: new InstantVerdictsForBenchmark(), prepared: standInRun(problems, config.seed) });
    if (!out.finished) throw new Error('the scale run did not finish');
  }
  return dir;
}

async function demoRun(args: string[]): Promise<string> {
  const given = option(args, 'run');
  if (given) return given;
  const config = loadConfigFile(path.resolve('configs/demo.yaml'));
  const base = path.join(os.tmpdir(), 'crucible-bench-ablate');
  const dir = path.join(base, runIdOf(config));
  if (!existsSync(path.join(dir, 'views.db'))) {
    process.stdout.write(`making the demo run in ${dir} (once)...\n`);
    const out = await runExperiment({ config: { ...config, dir: base }, dir, cacheDir: path.join(base, '.cache') });
    if (!out.finished) throw new Error('the demo run did not finish');
  }
  return dir;
}

export async function runBench(args: string[]): Promise<void> {
  const scale = option(args, 'scale');
  const dir = scale !== undefined ? await scaleRun(Number(scale)) : await demoRun(args);
  const repeat = Number(option(args, 'repeat') ?? 3);
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'crucible-ablate-bench-'));
  try {
    const best = (xs: number[]) => Math.min(...xs);
    const readMs: number[] = [];
    let events = 0;
    for (let i = 0; i < repeat; i++) {
      const t = performance.now();
      events = 0;
      for await (const page of log.readPages!({}, {})) events += page.length;
      readMs.push(performance.now() - t);
    }
    // One and four are measured in turns, best of each, so load from other processes hits both alike.
    // CPU time of this process beside wall time: on a shared machine the wall time also counts
    // other processes' turns, the CPU time only this one's work.
    const runOnce = async (specs: string[], out: string, threads = 1) => {
      const cpu = process.cpuUsage();
      const t = performance.now();
      const result = await ablate({ log, dir: out, variants: specs.map(parseVariantSpec), threads });
      const ms = performance.now() - t;
      const used = process.cpuUsage(cpu);
      if (result.variants.some((v) => v.status !== 'answered')) throw new Error(`a variant was refused: ${JSON.stringify(result.variants)}`);
      return { ms, cpuMs: (used.user + used.system) / 1000, result };
    };
    type Measured = Awaited<ReturnType<typeof runOnce>>;
    let one: Measured | null = null;
    let four: Measured | null = null;
    let threaded: Measured | null = null;
    let oneCpu = Infinity;
    let fourCpu = Infinity;
    // Every turn's figures too: on a shared machine the best of a few can be one lucky turn.
    const turns = { one: [] as { ms: number; cpuMs: number }[], four: [] as { ms: number; cpuMs: number }[] };
    let separate = Infinity;
    for (let i = 0; i < repeat; i++) {
      const a = await runOnce(FOUR.slice(0, 1), path.join(scratch, `1-${i}`));
      if (!one || a.ms < one.ms) one = a;
      oneCpu = Math.min(oneCpu, a.cpuMs);
      turns.one.push(a);
      const b = await runOnce(FOUR, path.join(scratch, `4-${i}`));
      if (!four || b.ms < four.ms) four = b;
      fourCpu = Math.min(fourCpu, b.cpuMs);
      turns.four.push(b);
      if (scale !== undefined) continue;
      const c = await runOnce(FOUR, path.join(scratch, `t-${i}`), 2);
      if (!threaded || c.ms < threaded.ms) threaded = c;
      // The same four variants as four calls, each reading the log itself.
      let sum = 0;
      for (const [j, v] of FOUR.entries()) sum += (await runOnce([v], path.join(scratch, `s${j}-${i}`))).ms;
      separate = Math.min(separate, sum);
    }
    // A second call with the same variants: answered from their files.
    const t = performance.now();
    const stored = await ablate({ log, dir: path.join(scratch, '4-0'), variants: FOUR.map(parseVariantSpec) });
    const storedMs = performance.now() - t;

    const line = (label: string, ms: number, extra = '') => process.stdout.write(`${label.padEnd(44)} ${ms.toFixed(0).padStart(7)} ms  ${extra}\n`);
    process.stdout.write(`ablate on ${dir}: ${events} events, best of ${repeat}\n`);
    line('baseline: read and decode the log once', best(readMs), `${Math.round(events / (best(readMs) / 1000))} events/s`);
    line(
      'one variant (alpha=0)',
      one!.ms,
      `${Math.round(events / (one!.ms / 1000))} events/s  (re-judge ${one!.result.timings.judgeMs.toFixed(0)} ms, project ${one!.result.timings.projectMs.toFixed(0)} ms)`,
    );
    line(
      'four variants together',
      four!.ms,
      `${Math.round((4 * events) / (four!.ms / 1000))} variant-events/s  (re-judge ${four!.result.timings.judgeMs.toFixed(0)} ms, project ${four!.result.timings.projectMs.toFixed(0)} ms)`,
    );
    const f = four!.result;
    process.stdout.write(
      `  built once and copied: ${f.shared.map((names) => names.join(', ')).join('; ') || 'none'}; answer selection counting only its Mistake Book tallies again: ${f.derivedSelection.map((d) => `${d.name} (beside ${d.from})`).join(', ') || 'none'}\n`,
    );
    if (threaded)
      line(
        'four variants together, projected on 2 threads',
        threaded.ms,
        `(re-judge ${threaded.result.timings.judgeMs.toFixed(0)} ms, project ${threaded.result.timings.projectMs.toFixed(0)} ms)`,
      );
    if (separate < Infinity) line('four variants as four calls (four reads)', separate, `${Math.round((4 * events) / (separate / 1000))} variant-events/s`);
    line('four variants again (answered from files)', storedMs, `${stored.eventsRead} events read`);
    line('one variant, CPU time', oneCpu);
    line('four variants together, CPU time', fourCpu);
    const median = (xs: number[]) => {
      const s = [...xs].sort((x, y) => x - y);
      return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    const [mo, mf] = [turns.one, turns.four].map((t) => ({ ms: median(t.map((x) => x.ms)), cpuMs: median(t.map((x) => x.cpuMs)) }));
    process.stdout.write(
      `medians of ${repeat}: one ${mo!.ms.toFixed(0)} ms wall, ${mo!.cpuMs.toFixed(0)} ms CPU; four ${mf!.ms.toFixed(0)} ms wall, ${mf!.cpuMs.toFixed(0)} ms CPU: ${(mf!.ms / mo!.ms).toFixed(2)}x wall, ${(mf!.cpuMs / mo!.cpuMs).toFixed(2)}x CPU\n`,
    );
    process.stdout.write(
      `four together / one: ${(four!.ms / one!.ms).toFixed(2)}x wall, ${(fourCpu / oneCpu).toFixed(2)}x CPU (goal <= 1.5x)${separate < Infinity ? `; four calls / one: ${(separate / one!.ms).toFixed(2)}x` : ''}\n`,
    );
  } finally {
    await log.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
