/**
 * What the read-only commands (`runs`, `compare`, `report`, `replay`) do with the files of real
 * small runs: the headline figures and the config diff of `compare`, every run listed by `runs`
 * whatever its neighbours hold, damaged derived files named with their fix (exit status 3) and
 * rebuilt by `replay --rebuild`, and a log that no read-only command writes.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { catalogCache } from '../support/catalog-cache.js';
import { runMain } from '../support/cli.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import type { compareRuns } from '../../src/report/compare.js';
import type { ConfigDifference } from '../../src/report/config-diff.js';

let root: string;
let a: RunOutcome;
let b: RunOutcome;
const crucible = runMain;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-run-files-'));
  const cacheDir = catalogCache();
  a = await runExperiment({ config: twoProblemConfig(path.join(root, 'runs'), { rounds: 2 }), cacheDir });
  b = await runExperiment({ config: twoProblemConfig(path.join(root, 'runs'), { rounds: 2, seed: 4, rewards: { alpha: 0.3 } }), cacheDir });
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A copy of a run's files in a directory of its own (the originals stay whole for other tests). */
function copyRun(run: RunOutcome, name: string): string {
  const dir = path.join(root, name, path.basename(run.dir));
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(run.dir)) if (/^(log|views|snapshots)\.db(-wal|-shm)?$/.test(f)) copyFileSync(path.join(run.dir, f), path.join(dir, f));
  return dir;
}

/** Overwrites part of a SQLite file past its header: SQLite opens it, then finds it malformed. */
function corrupt(file: string): void {
  const bytes = readFileSync(file);
  bytes.fill(0x17, 8192, Math.min(bytes.length, 8192 + 60_000));
  writeFileSync(file, bytes);
}

async function policyEvaluated(run: RunOutcome): Promise<Map<number, EventData<'PolicyEvaluated'>>> {
  const log = await openSqliteLog(path.join(run.dir, 'log.db'), { create: false, readOnly: true });
  const out = new Map<number, EventData<'PolicyEvaluated'>>();
  try {
    for await (const e of log.read({}, { types: ['PolicyEvaluated'] })) {
      const d = e.data as EventData<'PolicyEvaluated'>;
      out.set(d.round, d);
    }
  } finally {
    await log.close();
  }
  return out;
}

describe('crucible compare', () => {
  it("prints P(correct) and P(valid test) from each run's PolicyEvaluated, and the settings that differ", async () => {
    const out = await crucible(['compare', a.dir, b.dir, '--json']);
    expect(out.code).toBe(0);
    const parsed = JSON.parse(out.stdout) as { config: ConfigDifference[]; tables: ReturnType<typeof compareRuns> };
    const [ea, eb] = [await policyEvaluated(a), await policyEvaluated(b)];
    const correct = parsed.tables.find((t) => t.metric === 'exactCorrect')!;
    const valid = parsed.tables.find((t) => t.metric === 'exactValid')!;
    expect(correct.rows.map((r) => r.values)).toEqual([1, 2].map((k) => [ea.get(k)!.sampled.correct, eb.get(k)!.sampled.correct]));
    expect(valid.rows.map((r) => r.values)).toEqual([1, 2].map((k) => [ea.get(k)!.sampled.validTest, eb.get(k)!.sampled.validTest]));
    // The config diff holds exactly the keys the two runs were given apart.
    expect(parsed.config).toEqual([
      { key: 'rewards.alpha', values: [0.5, 0.3] },
      { key: 'seed', values: [3, 4] },
    ]);
    const text = await crucible(['compare', a.dir, b.dir]);
    expect(text.stdout).toMatch(/^config\n\s*setting\s+A\s+B\n[- ]+\n\s*rewards\.alpha\s+0\.5\s+0\.3\n\s*seed\s+3\s+4$/m);
    expect(text.stdout).toMatch(/^P\(correct\)\nround\s+A\s+B\s+B-A$/m);
    expect(text.stdout).toMatch(/^P\(valid test\)\nround\s+A\s+B\s+B-A$/m);
    const badLast = await crucible(['compare', a.dir, b.dir, '--last', '0']);
    expect(badLast.code).toBe(2);
    expect(badLast.stderr).toMatch(/--last must be a whole number of rounds >= 1, got 0/);
    const same = await crucible(['compare', a.dir, a.dir]);
    expect(same.stdout).toMatch(/^config\nthe same in every run$/m);
  });
});

describe('crucible compare over seeds', () => {
  // The config of run A under a second seed, and its frozen control under both seeds.
  let c: RunOutcome;
  let controls: RunOutcome[];
  beforeAll(async () => {
    const cacheDir = catalogCache();
    c = await runExperiment({ config: twoProblemConfig(path.join(root, 'seeds'), { rounds: 2, seed: 4 }), cacheDir });
    controls = [];
    for (const seed of [3, 4]) {
      controls.push(await runExperiment({ config: twoProblemConfig(path.join(root, 'seeds'), { rounds: 2, seed, learner: { control: 'frozen' } }), cacheDir }));
    }
  }, 300_000);

  it('prints trained minus control per round and over the last rounds, paired by seed, with a bootstrap interval', async () => {
    const dirs = [controls[1]!.dir, a.dir, controls[0]!.dir, c.dir];
    const out = await crucible(['compare', ...dirs, '--json']);
    expect(out.code, out.stderr).toBe(0);
    type Effect = { mean: number; lo: number; hi: number; seeds: number } | null;
    const parsed = JSON.parse(out.stdout) as {
      tables: ReturnType<typeof compareRuns>;
      effect: {
        trained: string;
        control: string;
        seeds: number[];
        differences: string[];
        tables: { metric: string; rows: { round: number | 'last'; rounds: number[]; effect: Effect }[] }[];
      };
    };
    expect(parsed.effect.seeds).toEqual([3, 4]);
    expect(parsed.effect.differences).toEqual(['learner.control']);
    expect(parsed.effect.control).toMatch(/learner\.control="frozen"/);
    // From the side-by-side tables: runs in the order given (control 4, trained 3, control 3, trained 4).
    const pass = parsed.tables.find((t) => t.metric === 'heldOutPass')!;
    const effect = parsed.effect.tables.find((t) => t.metric === 'heldOutPass')!;
    for (const round of [1, 2]) {
      const v = pass.rows.find((r) => r.round === round)!.values as number[];
      const diffs = [v[1]! - v[2]!, v[3]! - v[0]!];
      const e = effect.rows.find((r) => r.round === round)!.effect!;
      expect(e.mean).toBeCloseTo((diffs[0]! + diffs[1]!) / 2, 12);
      expect(e.lo).toBeCloseTo(Math.min(...diffs), 12);
      expect(e.hi).toBeCloseTo(Math.max(...diffs), 12);
      expect(e.seeds).toBe(2);
    }
    expect(effect.rows.at(-1)).toMatchObject({ round: 'last', rounds: [2] });
    const text = await crucible(['compare', ...dirs, '--last', '2']);
    expect(text.stdout).toMatch(/^effect over seeds: small \(learner\.control="none"\) minus small \(learner\.control="frozen"\), paired by seed \(3, 4\)/m);
    expect(text.stdout).toMatch(/^\s*held-out pass\s+[-+]?\d+\.\d pt \[[-+]?\d+\.\d, [-+]?\d+\.\d\]/m);
    expect(text.stdout).toMatch(/rounds 1-2/);
    // Seeds that do not pair are said, not guessed at.
    const unpaired = await crucible(['compare', a.dir, c.dir, b.dir]);
    expect(unpaired.stdout).toMatch(/^effect over seeds: not computed \(only one seed in common\)$/m);
  }, 120_000);
});

describe('damaged files', () => {
  it('crucible runs lists every readable run and marks the others unreadable with the reason', async () => {
    const dir = path.join(root, 'listing');
    // Sorted first: the damaged run comes before the readable one.
    const damaged = copyRun(a, 'listing');
    const readable = copyRun(b, 'listing');
    corrupt(path.join(damaged, 'views.db'));
    mkdirSync(path.join(dir, 'empty-log'));
    writeFileSync(path.join(dir, 'empty-log', 'log.db'), 'not a database at all, just text');
    const out = await crucible(['runs', dir]);
    expect(out.code).toBe(1);
    expect(out.stdout).toMatch(new RegExp(`^\\s*${path.basename(readable)}\\s+small\\s+code-a1\\s+4\\s+finished\\s+2/2`, 'm'));
    expect(out.stdout).toContain(`  ${path.basename(damaged)}: ${path.join(damaged, 'views.db')} is damaged or not a crucible file (`);
    expect(out.stdout).toContain(`crucible replay ${damaged} --rebuild`);
    expect(out.stdout).toMatch(/^ {2}empty-log: .*log\.db.*not an SQLite database/m);
    const json = (await crucible(['runs', dir, '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { runId?: string; dir: string; unreadable?: string });
    expect(json.map((r) => r.runId ?? `unreadable ${path.basename(r.dir)}`).sort()).toEqual(
      [b.runId, `unreadable ${path.basename(damaged)}`, 'unreadable empty-log'].sort(),
    );
  });

  it('a corrupt or foreign views.db is one line naming the file and the fix, exit status 3; replay --rebuild fixes it', async () => {
    const dir = copyRun(a, 'corrupt-views');
    const views = path.join(dir, 'views.db');
    corrupt(views);
    for (const args of [
      ['report', dir, '--out', path.join(root, 'r.html')],
      ['compare', dir, b.dir],
      ['replay', dir, '--verify'],
    ]) {
      const out = await crucible(args);
      expect({ args, code: out.code }).toEqual({ args, code: 3 });
      expect(out.stderr).toBe(
        `crucible: ${views} is damaged or not a crucible file (${out.stderr.slice(out.stderr.indexOf('(') + 1, out.stderr.lastIndexOf(');'))}); it is rebuilt from the log by: crucible replay ${dir} --rebuild\n`,
      );
    }
    const rebuilt = await crucible(['replay', dir, '--rebuild']);
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.stdout).toMatch(/rebuilt from the log: .*views\.db/);
    expect((await crucible(['replay', dir, '--verify'])).stdout).toMatch(/verified: every read model equals its replay/);
    expect((await crucible(['compare', dir, b.dir])).code).toBe(0);
    // Another application's database in its place: refused untouched, with the same fix.
    rmSync(views);
    const other = new Database(views);
    other.exec('CREATE TABLE customers (id INTEGER)');
    other.close();
    const foreign = await crucible(['report', dir, '--out', path.join(root, 'r.html')]);
    expect(foreign.code).toBe(3);
    expect(foreign.stderr).toMatch(
      /views\.db is damaged or not a crucible file \(it is another SQLite database \(tables: customers\)\); it is rebuilt from the log by: crucible replay .* --rebuild\n$/,
    );
    const kept = new Database(views, { readonly: true });
    expect(kept.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()).toEqual(['customers']);
    kept.close();
    expect((await crucible(['replay', dir, '--rebuild'])).code).toBe(0);
    expect((await crucible(['replay', dir, '--verify'])).code).toBe(0);
  });

  it('a damaged snapshots.db stops a resumed run with one line and exit status 3; after replay --rebuild the run resumes', async () => {
    const dir = copyRun(a, 'snapshots');
    const config = { ...twoProblemConfig(path.join(root, 'runs'), { rounds: 2 }) };
    const file = path.join(root, 'small.yaml');
    writeFileSync(file, stringify(config));
    const snapshots = path.join(dir, 'snapshots.db');
    writeFileSync(snapshots, 'this is not the snapshot file any more, only text');
    const out = await crucible(['run', file, '--dir', dir, '--json']);
    expect(out.code).toBe(3);
    expect(out.stderr).toBe(
      `crucible: ${snapshots} is damaged or not a crucible file (SQLite cannot read it (file is not a database)); it is rebuilt from the log by: crucible replay ${dir} --rebuild\n`,
    );
    expect((await crucible(['replay', dir, '--rebuild'])).code).toBe(0);
    expect(existsSync(snapshots)).toBe(false);
    const resumed = await crucible(['run', file, '--dir', dir, '--json']);
    expect(resumed.code).toBe(0);
    expect(
      resumed.stdout
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { heldOutPass: number }).heldOutPass),
    ).toEqual(a.rows.map((r) => r.heldOutPass));
  });
});

describe('read-only commands', () => {
  const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

  it('never write the log: an older log keeps its format marker, and no -wal or -shm is left beside it', async () => {
    const dir = copyRun(a, 'read-only');
    const log = path.join(dir, 'log.db');
    // A log of format 2 (written before format 3): opening it to write would mark it format 3.
    const db = new Database(log);
    db.prepare("UPDATE crucible_meta SET value = '2' WHERE key = 'format'").run();
    db.close();
    expect(readdirSync(dir).filter((f) => f.startsWith('log.db'))).toEqual(['log.db']);
    const before = digest(log);
    for (const args of [
      ['runs', path.dirname(dir)],
      ['compare', dir, b.dir],
      ['report', dir, '--out', path.join(root, 'ro.html')],
      ['replay', dir, '--verify'],
    ]) {
      const out = await crucible(args);
      expect({ args, code: out.code, stderr: out.stderr }).toEqual({ args, code: 0, stderr: '' });
      expect({ args, files: readdirSync(dir).filter((f) => f.startsWith('log.db')) }).toEqual({ args, files: ['log.db'] });
      expect(digest(log)).toBe(before);
    }
    const check = new Database(log, { readonly: true });
    expect(check.prepare("SELECT value FROM crucible_meta WHERE key = 'format'").pluck().get()).toBe('2');
    check.close();
  });
});
