/**
 * The three determinism statements of docs/determinism.md, on real runs of the demo (real SQLite
 * log, real sandbox, real python; two problems, whose programs all finish quickly):
 *   (a) replaying a given log always gives the same read-model state hashes;
 *   (b) a commit depends only on the config, the seed and the content of the events that caused
 *       it, never on positions or arrival order;
 *   (c) two runs of one config and seed hold the same commits by commit id, apart from timings.
 * (b) and (c) are tested together: runs whose effects finish, and whose outputs are appended, in
 * seeded random orders (a scheduler injected into the runtime) must write the same commits as
 * the run in the fixed order; an actor reading arrival order would make them differ.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { decisionOf, recordedEvents, type Decision } from '../support/run-log.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { runCli } from '../support/cli.js';
import { ShuffledScheduler } from '../support/shuffled-scheduler.js';
import { catalogCache } from '../support/catalog-cache.js';

let root: string;
const cacheDir = catalogCache;

const figures = (rows: RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

/** The log as commits by commit id, each with its events in commit order, timings left out;
 * and the commit ids in log order (to show that the order did change). */
async function commitsOf(dir: string) {
  const commits = new Map<string, Decision[]>();
  const order: string[] = [];
  for (const e of await recordedEvents(dir)) {
    let list = commits.get(e.commitId);
    if (!list) {
      commits.set(e.commitId, (list = []));
      order.push(e.commitId);
    }
    list.push(decisionOf(e));
  }
  return { commits: Object.fromEntries([...commits].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))), order };
}

let baseline: RunOutcome;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-determinism-'));
  baseline = await runExperiment({ config: twoProblemConfig(root), dir: path.join(root, 'fixed'), cacheDir: cacheDir() });
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the shuffled step scheduler', () => {
  it('runs a seeded part of the work and shuffles the rest reproducibly, never an empty step', () => {
    const items = Array.from({ length: 20 }, (_, i) => i);
    const a = new ShuffledScheduler({ seed: 5, deferChance: 0.5 });
    const b = new ShuffledScheduler({ seed: 5, deferChance: 0.5 });
    const picked = a.pick(items);
    expect(b.pick(items)).toEqual(picked);
    expect(picked.length).toBeGreaterThan(0);
    expect(picked.length).toBeLessThan(items.length);
    expect(a.order(items)).toEqual(b.order(items));
    expect(a.order(items)).not.toEqual(items);
    expect(new ShuffledScheduler({ seed: 1, deferChance: 0.99 }).pick([7, 8])).toHaveLength(1);
    expect(() => new ShuffledScheduler({ seed: 1, deferChance: 1 })).toThrow(/deferChance/);
  });
});

describe('determinism (b)(c): arrival order changes nothing but the order', () => {
  const perturbations = [
    { name: 'outputs appended in a random order', reorder: { seed: 11 } },
    { name: 'effects finishing in a random order, outputs appended in a random order', reorder: { seed: 29, deferChance: 0.5 } },
  ];
  for (const { name, reorder } of perturbations) {
    it(`${name}: the same commits by commit id, the same round table`, async () => {
      const run = await runExperiment({
        config: twoProblemConfig(root),
        dir: path.join(root, `reorder-${reorder.seed}`),
        cacheDir: cacheDir(),
        scheduler: new ShuffledScheduler(reorder),
      });
      expect(run.finished).toBe(true);
      expect(run.runId).toBe(baseline.runId);
      const fixed = await commitsOf(baseline.dir);
      const shuffled = await commitsOf(run.dir);
      // The perturbation did reach the log...
      expect(shuffled.order).not.toEqual(fixed.order);
      // ...and changed nothing else.
      expect(Object.keys(shuffled.commits)).toEqual(Object.keys(fixed.commits));
      for (const id of Object.keys(fixed.commits)) expect({ id, events: shuffled.commits[id] }).toEqual({ id, events: fixed.commits[id] });
      expect(figures(run.rows)).toEqual(figures(baseline.rows));
    }, 300_000);
  }
});

describe('determinism (b)(c) for other settings', () => {
  // White-box suites (one per solution) and Code-A1's TOPVAR selection, whose ties follow the
  // order of the suites; and TCS, whose rolling buffer keeps suites across rounds.
  const settings = [
    {
      name: 'white-box with TOPVAR selection',
      overrides: { sampling: { problemsPerRound: 2, groupSize: 6, suitesPerProgram: 2, suiteSize: 4, whiteBox: true }, selection: { testSamples: 'topvar' } },
    },
    { name: 'TCS', overrides: { method: 'tcs', rounds: 3 } },
  ];
  for (const { name, overrides } of settings) {
    it(`${name}: effects finishing and appended in a random order write the same commits and table`, async () => {
      const config = twoProblemConfig(root, overrides);
      const tag = name.replace(/\W+/g, '-');
      const fixed = await runExperiment({ config, dir: path.join(root, `${tag}-fixed`), cacheDir: cacheDir() });
      const run = await runExperiment({
        config,
        dir: path.join(root, `${tag}-reorder`),
        cacheDir: cacheDir(),
        scheduler: new ShuffledScheduler({ seed: 3, deferChance: 0.4 }),
      });
      expect(run.finished).toBe(true);
      const a = await commitsOf(fixed.dir);
      const b = await commitsOf(run.dir);
      expect(b.order).not.toEqual(a.order);
      expect(Object.keys(b.commits)).toEqual(Object.keys(a.commits));
      for (const id of Object.keys(a.commits)) expect({ id, events: b.commits[id] }).toEqual({ id, events: a.commits[id] });
      expect(figures(run.rows)).toEqual(figures(fixed.rows));
    }, 300_000);
  }
});

describe('determinism (a): replaying a log gives the same state hashes', () => {
  it('twice over one log, and equal to the live read models', async () => {
    const dir = path.join(root, 'reorder-29');
    const first = JSON.parse((await runCli(['replay', dir, '--json'])).out) as { hashes: Record<string, string> };
    const second = JSON.parse((await runCli(['replay', dir, '--verify', '--json'])).out) as { hashes: Record<string, string>; verified: boolean };
    expect(Object.keys(first.hashes).length).toBeGreaterThan(0);
    expect(second.hashes).toEqual(first.hashes);
    expect(second.verified).toBe(true);
  }, 120_000);
});
