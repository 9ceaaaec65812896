/**
 * End-to-end runs of the adversarial loop on the embedded default (real SQLite log, real
 * sandbox, real python), small enough for the suite: learning direction, determinism, an actor
 * killed mid-round, a whole process stopped and resumed, and replay --verify.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { twoProblemConfig } from '../support/small-config.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { runCli } from '../support/cli.js';
import { recordedDecisions } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

let root: string;
const cacheDir = catalogCache;

const smallConfig = (overrides: Record<string, unknown> = {}) => twoProblemConfig(root, overrides);

/** Everything but wall-clock time. */
const figures = (rows: RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

/** The log without timings (measurements, not decisions). */
const eventsOf = recordedDecisions;

let baseline: RunOutcome;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-run-'));
  baseline = await runExperiment({ config: smallConfig(), dir: path.join(root, 'baseline'), cacheDir: cacheDir() });
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('crucible run on the demo set', () => {
  it('finishes every round and the Solver learns: held-out pass rises', () => {
    expect(baseline.finished).toBe(true);
    expect(baseline.rows.map((r) => r.round)).toEqual([1, 2, 3, 4]);
    const first = baseline.rows[0]!;
    const last = baseline.rows.at(-1)!;
    expect(last.heldOutPass).toBeGreaterThan(first.heldOutPass);
    expect(last.codeReward).toBeGreaterThan(first.codeReward);
    for (const r of baseline.rows) {
      expect(r.validity).toBeGreaterThan(0);
      expect(r.validity).toBeLessThanOrEqual(1);
      expect(r.killRate).toBeGreaterThan(0);
    }
  });

  it('another seed makes another run', async () => {
    const other = await runExperiment({ config: smallConfig({ seed: 4 }), dir: path.join(root, 'seed4'), cacheDir: cacheDir() });
    expect(other.runId).not.toBe(baseline.runId);
    expect(await eventsOf(other.dir)).not.toEqual(await eventsOf(baseline.dir));
  }, 300_000);

  it('a judge and an executor killed mid-round and restarted end with the same tables', async () => {
    const actors = ['judge', 'executor'] as const;
    const killedAt = { judge: -1, executor: -1 };
    const restarted = new Set<string>();
    const outcome = await runExperiment({
      config: smallConfig(),
      dir: path.join(root, 'kill'),
      cacheDir: cacheDir(),
      onStep: (runtime, p) => {
        // Mid-round 2: each once some of its work is recorded and before the round ends.
        if (p.round !== 1 || runtime.position === 0) return;
        for (const actor of actors) {
          if (killedAt[actor] >= 0 || !runtime.isAlive(actor)) continue;
          const snap = runtime.snapshotOf(actor);
          const ctx = snap?.context as { requests?: unknown[] };
          const busy = actor === 'judge' ? Object.keys(snap?.children ?? {}).length > 0 : (ctx.requests ?? []).length > 0;
          if (busy) {
            runtime.kill(actor);
            killedAt[actor] = runtime.position;
          }
        }
      },
      onIdle: async (runtime) => {
        const dead = actors.filter((a) => !runtime.isAlive(a));
        for (const actor of dead) {
          await runtime.restart(actor);
          restarted.add(actor);
        }
        return dead.length > 0;
      },
    });
    expect(killedAt.judge).toBeGreaterThan(0);
    expect(killedAt.executor).toBeGreaterThan(0);
    expect([...restarted].sort()).toEqual(['executor', 'judge']);
    expect(outcome.finished).toBe(true);
    expect(figures(outcome.rows)).toEqual(figures(baseline.rows));
  }, 300_000);

  // The same config and seed write the same log: a run stopped mid-way and resumed writes, event
  // for event, the log of the uninterrupted baseline (and determinism.test.ts compares whole
  // runs made in perturbed orders).
  it('is deterministic: a process stopped mid-run resumes from its log to the same tables and the same log', async () => {
    const dir = path.join(root, 'resume');
    const stopped = await runExperiment({ config: smallConfig(), dir, cacheDir: cacheDir(), stopWhen: (p) => p.round >= 2 && p.events > 0 });
    expect(stopped.finished).toBe(false);
    const resumed = await runExperiment({ config: smallConfig(), dir, cacheDir: cacheDir() });
    expect(resumed.finished).toBe(true);
    expect(figures(resumed.rows)).toEqual(figures(baseline.rows));
    expect(await eventsOf(dir)).toEqual(await eventsOf(baseline.dir));
  }, 300_000);

  it('refuses to resume a run directory with another config', async () => {
    await expect(runExperiment({ config: smallConfig({ rounds: 5 }), dir: baseline.dir, cacheDir: cacheDir() })).rejects.toThrow(/another config/);
  });
});

describe('crucible replay', () => {
  const replay = (args: string[]) => runCli(['replay', ...args]);

  it('--verify passes on a finished run and prints the state hashes', async () => {
    type Verified = { verified: boolean; hashes: Record<string, string>; rows: RoundRow[]; differences: string[]; notCompared: string[] };
    // The run keeps four read models as it goes; answer selection is a reader's to build.
    const checkpointOf = (name: string) => {
      const db = new Database(path.join(baseline.dir, 'views.db'), { readonly: true });
      try {
        return db.prepare('SELECT position FROM crucible_projections WHERE name = ?').pluck().get(name) as number | undefined;
      } finally {
        db.close();
      }
    };
    expect(checkpointOf('round-table')).toBeGreaterThan(0);
    expect(checkpointOf('answer-selection')).toBeUndefined();
    const before = await replay([baseline.dir, '--verify', '--json']);
    const unbuilt = JSON.parse(before.out) as Verified;
    expect(before.code).toBe(0);
    expect(unbuilt.verified).toBe(true);
    expect(unbuilt.notCompared).toEqual(['answer-selection']);
    expect(Object.keys(unbuilt.hashes)).toEqual(['round-table', 'mistake-book', 'rewards', 'policy-versions', 'answer-selection']);

    // A report builds it in views.db, where --verify then compares it too.
    const report = await runCli(['report', baseline.dir, '--out', path.join(root, 'report.html')]);
    expect(report.code).toBe(0);
    expect(checkpointOf('answer-selection')).toBe(checkpointOf('round-table'));
    const { code, out } = await replay([baseline.dir, '--verify', '--json']);
    const result = JSON.parse(out) as Verified;
    expect(code).toBe(0);
    expect(result.verified).toBe(true);
    expect(result.notCompared).toEqual([]);
    expect(result.hashes).toEqual(unbuilt.hashes);
    expect(figures(result.rows)).toEqual(figures(baseline.rows));
  });

  it('--round k rebuilds the Mistake Book as it stood after round k', async () => {
    const full = JSON.parse((await replay([baseline.dir, '--json'])).out) as { hashes: Record<string, string>; position: number };
    const early = JSON.parse((await replay([baseline.dir, '--round', '1', '--json'])).out) as {
      hashes: Record<string, string>;
      position: number;
      rows: RoundRow[];
    };
    expect(early.position).toBeLessThan(full.position);
    expect(early.rows.map((r) => r.round)).toEqual([1]);
    expect(early.hashes['mistake-book']).not.toBe(full.hashes['mistake-book']);
  });

  it('--verify fails on a tampered read model', async () => {
    const dir = path.join(root, 'resume');
    const db = new Database(path.join(dir, 'views.db'));
    const changed = db.prepare('UPDATE rewards SET reward = reward + 0.5 WHERE rowid = (SELECT min(rowid) FROM rewards)').run();
    db.close();
    expect(changed.changes).toBe(1);
    const { code, out } = await replay([dir, '--verify']);
    expect(code).toBe(1);
    expect(out).toMatch(/NOT verified[\s\S]*rewards/);
  });
});
