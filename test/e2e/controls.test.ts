/**
 * The demo's evidence, over seeds: the trained policies end above both controls, frozen (no
 * update) and shuffled (advantages permuted within each GRPO group), on the exact probability
 * of a correct program and on the sampled kill rate. The shipped configs, shrunk to fit the
 * suite (fewer problems and rounds); nothing else is changed. Also: the exact validity the
 * catalog knows agrees with the Judge's verdict on every test it judged.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { createSandbox } from '../../src/sandbox/index.js';
import type { Sandbox } from '../../src/sandbox/api.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import type { CatalogUniverse } from '../../src/datasets/demo/catalog/index.js';
import { canonicalJson } from '../../src/core/canonical-json.js';

const SEEDS = [7, 8, 9];
const CONFIGS = { trained: 'configs/demo.yaml', frozen: 'configs/demo-frozen.yaml', shuffled: 'configs/demo-shuffled.yaml' } as const;
type Arm = keyof typeof CONFIGS;
const SHRINK = ['rounds=4', 'dataset.limit=2', 'sampling.problemsPerRound=2', 'policies.code.mutants=4', 'policies.test.candidates=16'];

let root: string;
let sandbox: Sandbox;
const outcomes: Record<Arm, RunOutcome[]> = { trained: [], frozen: [], shuffled: [] };

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-controls-'));
  sandbox = await createSandbox({ pythonPath: '/usr/bin/python3' });
  // The seeds of an arm run together on the one sandbox: a run alone leaves its fork-servers idle
  // while a slow program's tests run one after another. Each seed builds its own catalog (the
  // first arm) and the other arms read it from the cache.
  for (const arm of Object.keys(CONFIGS) as Arm[]) {
    outcomes[arm] = await Promise.all(
      SEEDS.map((seed) =>
        runExperiment({ config: loadConfigFile(CONFIGS[arm], { overrides: [...SHRINK, `dir=${root}`], seed }), sandbox, cacheDir: path.join(root, 'cache') }),
      ),
    );
  }
}, 600_000);

afterAll(async () => {
  // The figures compared below, for the record of a run of this file.
  for (const arm of Object.keys(CONFIGS) as Arm[]) {
    const rows = outcomes[arm].map((o) => o.rows.at(-1));
    console.info(
      `${arm}: final P(correct) ${rows.map((r) => r?.trainedCorrect?.toFixed(3)).join(' ')}; last-round kill rate ${rows.map((r) => r?.killRate?.toFixed(3)).join(' ')}`,
    );
  }
  await sandbox?.close();
  rmSync(root, { recursive: true, force: true });
});

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const last = (arm: Arm) => outcomes[arm].map((o) => o.rows.at(-1)!);

describe('the demo against its controls', () => {
  it('every run finishes with exact figures recorded for every round', () => {
    for (const arm of Object.keys(CONFIGS) as Arm[]) {
      for (const o of outcomes[arm]) {
        expect(o.finished).toBe(true);
        expect(o.rows.map((r) => r.round)).toEqual([1, 2, 3, 4]);
        for (const r of o.rows) {
          expect(r.exactCorrect).not.toBeNull();
          expect(r.exactValid).not.toBeNull();
        }
      }
    }
  });

  it('frozen applies no update: the exact figures never move from the uniform start', () => {
    for (const o of outcomes.frozen) {
      const first = o.rows[0]!;
      for (const r of o.rows) {
        expect(r.trainedCorrect).toBeCloseTo(first.exactCorrect!, 12);
        expect(r.trainedValid).toBeCloseTo(first.exactValid!, 12);
      }
    }
  });

  it('the three arms draw the same first round (same seed semantics)', () => {
    SEEDS.forEach((_, k) => {
      const first = (arm: Arm) => outcomes[arm][k]!.rows[0]!;
      for (const arm of ['frozen', 'shuffled'] as const) {
        expect(first(arm).heldOutPass).toBe(first('trained').heldOutPass);
        expect(first(arm).exactCorrect).toBe(first('trained').exactCorrect);
        expect(first(arm).killRate).toBe(first('trained').killRate);
      }
    });
  });

  it('the trained policy ends above both controls on P(correct program), mean over seeds', () => {
    const trained = mean(last('trained').map((r) => r.trainedCorrect!));
    for (const control of ['frozen', 'shuffled'] as const) {
      expect(trained).toBeGreaterThan(mean(last(control).map((r) => r.trainedCorrect!)));
    }
  });

  it('the trained test policy ends above both controls on kill rate, mean over seeds', () => {
    // Every arm judges generated tests, so its kill rate exists.
    const trained = mean(last('trained').map((r) => r.killRate!));
    for (const control of ['frozen', 'shuffled'] as const) {
      expect(trained).toBeGreaterThan(mean(last(control).map((r) => r.killRate!)));
    }
  });

  it("the catalog's test validity (the exact figure's basis) agrees with every verdict of the Judge", async () => {
    const validByHash = new Map<string, boolean>();
    for (const file of readdirSync(path.join(root, 'cache')).filter((f) => f.startsWith('catalog-'))) {
      const universe = JSON.parse(readFileSync(path.join(root, 'cache', file), 'utf8')) as CatalogUniverse;
      for (const [problemId, tests] of Object.entries(universe.tests)) {
        const valid = new Set(universe.validTests[problemId]);
        for (const t of tests) validByHash.set(createHash('sha256').update(canonicalJson(t.test)).digest('hex'), valid.has(t.testId));
      }
    }
    let checked = 0;
    for (const o of outcomes.trained) {
      const log = await openSqliteLog(path.join(o.dir, 'log.db'), { create: false });
      for await (const e of log.read({}, { types: ['TestsJudged'] })) {
        for (const t of (e.data as EventData<'TestsJudged'>).tests) {
          // A repeat within its suite is the suite's property, not the test's.
          if (t.reason === 'duplicate') continue;
          expect(validByHash.get(t.testHash), `test ${t.testId}`).toBe(t.valid);
          checked++;
        }
      }
      await log.close();
    }
    expect(checked).toBeGreaterThan(100);
  });
});
