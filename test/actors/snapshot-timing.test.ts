/**
 * When snapshots are taken: a due snapshot waits for a moment when the actors are at rest (the
 * Judge with no problem open, the Executor with no request in flight), so that it stores the
 * run's history rather than a step's work in flight, and never waits for more than `every`
 * events past due. Checked on a real run (SQLite log, real sandbox) as it goes, and on a refold
 * of its log from the start, on SQLite and, copied, on JetStream (a real nats-server).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { catalogCache } from '../support/catalog-cache.js';
import { runExperiment, runIdOf, type RunOutcome } from '../../src/actors/run.js';
import { ActorRuntime } from '../../src/actors/runtime.js';
import { SqliteSnapshotTable, decodeBody, type SnapshotTable, type StoredSnapshot } from '../../src/actors/snapshots.js';
import { judge } from '../../src/actors/judge.js';
import { executor } from '../../src/actors/executor.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { openJetStreamLog } from '../../src/events/jetstream/jetstream-log.js';
import { copyRun } from '../../src/events/transfer.js';
import type { EventLog } from '../../src/events/log.js';
import { startTestNats, uniqueLogNames } from '../support/nats.js';

/** Events per snapshot: a few per round of the small run, so most due points fall mid-round. */
const EVERY = 12;

let root: string;
let outcome: RunOutcome;
/** After each dispatcher step of the run: its position, the Judge's open problems and the
 * Executor's requests in flight then, and the position of the Judge's latest snapshot. */
const steps: { position: number; open: number; requests: number; snapshotAt: number | null }[] = [];

const judgeSnapshotAt = (dir: string): number | null => {
  const db = new Database(path.join(dir, 'snapshots.db'), { readonly: true });
  try {
    return (db.prepare("SELECT position FROM actor_snapshots WHERE actor = 'judge'").pluck().get() as number | undefined) ?? null;
  } finally {
    db.close();
  }
};

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-snapshot-timing-'));
  const config = twoProblemConfig(root);
  outcome = await runExperiment({
    config,
    dir: path.join(root, 'run'),
    cacheDir: catalogCache(),
    snapshotEvery: EVERY,
    onStep: (runtime) => {
      const open = Object.keys(runtime.snapshotOf('judge')!.children).length;
      const requests = (runtime.snapshotOf('executor')!.context as { requests: unknown[] }).requests.length;
      steps.push({ position: runtime.position, open, requests, snapshotAt: judgeSnapshotAt(path.join(root, 'run')) });
    },
  });
  expect(outcome.finished).toBe(true);
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('snapshot timing', () => {
  it('a live run takes each due snapshot when the Judge and the Executor are at rest, unless it is overdue by `every`', () => {
    const taken: { position: number; after: number; atRest: boolean }[] = [];
    let last = 0;
    for (const s of steps) {
      if (s.snapshotAt === null || s.snapshotAt === last) continue;
      // Taken in this step, after its fold and before its effects' outputs are folded: at the
      // step's position, in the state the step saw.
      expect(s.snapshotAt).toBe(s.position);
      taken.push({ position: s.snapshotAt, after: last, atRest: s.open === 0 && s.requests === 0 });
      last = s.snapshotAt;
    }
    expect(taken.length).toBeGreaterThanOrEqual(2);
    for (const t of taken) {
      expect(t.position - t.after, `snapshot at ${t.position}`).toBeGreaterThanOrEqual(EVERY);
      if (!t.atRest) expect(t.position - t.after, `snapshot at ${t.position}, not at rest`).toBeGreaterThanOrEqual(2 * EVERY);
    }
    // The rule was tested: some step was due (by count) while work was in flight, and waited.
    let since = 0;
    const waited = steps.some((s, i) => {
      since = steps[i - 1]?.snapshotAt ?? 0;
      return s.position - since >= EVERY && (s.open > 0 || s.requests > 0) && (s.snapshotAt ?? 0) === since;
    });
    expect(waited).toBe(true);
    expect(taken.filter((t) => t.atRest).length).toBeGreaterThanOrEqual(1);
  });

  /** The Judge's and the Executor's refold of `log` from the start, with every snapshot saved. */
  async function refold(log: EventLog, file: string): Promise<{ saved: StoredSnapshot[]; judgeEvents: number }> {
    const runId = runIdOf(twoProblemConfig(root));
    const inner = new SqliteSnapshotTable(path.join(root, file), runId);
    const saved: StoredSnapshot[] = [];
    const table: SnapshotTable = {
      latest: (actor) => inner.latest(actor),
      save: (snapshots) => {
        saved.push(...snapshots);
        inner.save(snapshots);
      },
      side: (actor) => inner.side(actor),
      close: () => inner.close(),
    };
    let judgeEvents = 0;
    try {
      const runtime = new ActorRuntime(log, runId, null as never, [judge, executor] as never, {
        snapshots: { table, every: EVERY },
        onRestart: (r) => {
          if (r.actor === 'judge') judgeEvents = r.eventsFolded;
        },
      });
      await runtime.start();
    } finally {
      table.close();
    }
    return { saved, judgeEvents };
  }

  it('a refold from the start snapshots the Judge at rest, and at most 2 x `every` positions apart', async () => {
    const log = await openSqliteLog(path.join(root, 'run', 'log.db'), { create: false });
    try {
      const { saved } = await refold(log, 'refold-snapshots.db');
      const ofJudge = saved.filter((s) => s.ref.actor === 'judge');
      expect(ofJudge.length).toBeGreaterThanOrEqual(2);
      let after = 0;
      let atRest = 0;
      for (const s of ofJudge) {
        const body = JSON.parse(decodeBody(s.body)) as { machine: { children: object } };
        const open = Object.keys(body.machine.children).length;
        expect(s.ref.position - after).toBeGreaterThanOrEqual(EVERY);
        if (open > 0) expect(s.ref.position - after, `snapshot at ${s.ref.position} with ${open} problems open`).toBeGreaterThanOrEqual(2 * EVERY);
        else atRest++;
        after = s.ref.position;
      }
      expect(atRest).toBeGreaterThanOrEqual(1);
    } finally {
      await log.close();
    }
  }, 120_000);

  it('a refold on JetStream snapshots every `every` events too, not at every commit (positions there are sequences x 65,536)', async () => {
    const nats = await startTestNats(1);
    const source = await openSqliteLog(path.join(root, 'run', 'log.db'), { create: false });
    const js = await openJetStreamLog({ servers: nats.urls, ...uniqueLogNames() });
    try {
      await copyRun(source, js, runIdOf(twoProblemConfig(root)));
      const onSqlite = await refold(source, 'refold-sqlite.db');
      const onJetStream = await refold(js, 'refold-jetstream.db');
      const judgeSaves = (r: { saved: StoredSnapshot[] }) => r.saved.filter((s) => s.ref.actor === 'judge').length;
      expect(onJetStream.judgeEvents).toBe(onSqlite.judgeEvents);
      // Due after `every` events read, as on SQLite: the same moments, so the same count.
      expect(judgeSaves(onSqlite)).toBeGreaterThanOrEqual(2);
      expect(judgeSaves(onJetStream)).toBe(judgeSaves(onSqlite));
    } finally {
      await js.close();
      await source.close();
      await nats.stop();
    }
  }, 180_000);
});
