/**
 * Actor snapshots on a real run (SQLite log, real sandbox, real python): a run stopped mid-way
 * and resumed starts every actor from its latest snapshot and folds only the events after it,
 * ending with the same tables and the same log as an uninterrupted run; a restart from a
 * snapshot and one from position 0 give identical actor state; a corrupt snapshot is refused
 * with an error naming it and the actor refolds from the start, as is one whose stored state
 * does not match its actor's schemas; a snapshot of another version (another code's schemas) is
 * ignored.
 */
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { runExperiment, runIdOf, type RunOutcome } from '../../src/actors/run.js';
import { ActorRuntime, eventTypesOf, type RestartReport } from '../../src/actors/runtime.js';
import { SNAPSHOT_FORMAT, SideRowCorruptError, SqliteSnapshotTable, decodeBody, encodeBody } from '../../src/actors/snapshots.js';
import { conductor } from '../../src/actors/conductor.js';
import { solver } from '../../src/actors/solver.js';
import { adversary } from '../../src/actors/adversary.js';
import { executor, type ExecutionCache } from '../../src/actors/executor.js';
import { JudgeContext, judge, type VerdictIndex } from '../../src/actors/judge.js';
import { learner } from '../../src/actors/learner.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { makeEvent } from '../../src/events/catalog.js';
import { entriesOfRows, fingerprintOf } from '../../src/actors/program-history.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { answerSelectionBothWays, recordedDecisions, type Decision } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

const ACTORS = [conductor, solver, adversary, executor, judge, learner];
let root: string;
const cacheDir = catalogCache;
const config = () => twoProblemConfig(root);
const figures = (rows: RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

const eventsOf = recordedDecisions;

interface SnapshotRow {
  actor: string;
  position: number;
  hash: string;
  version: string;
}

function snapshotRows(dir: string): Map<string, SnapshotRow> {
  const db = new Database(path.join(dir, 'snapshots.db'), { readonly: true });
  const rows = db.prepare('SELECT actor, position, hash, version FROM actor_snapshots').all() as SnapshotRow[];
  db.close();
  return new Map(rows.map((r) => [r.actor, r]));
}

/** Events an actor folds in (after, to], counted in the log file itself. */
function countFolded(dir: string, actor: (typeof ACTORS)[number], after: number): { count: number; head: number } {
  const db = new Database(path.join(dir, 'log.db'), { readonly: true });
  const types = [...eventTypesOf(actor as never)];
  const head = (db.prepare('SELECT max(position) FROM events').pluck().get() as number) ?? 0;
  const count = db
    .prepare(`SELECT count(*) FROM events WHERE position > ? AND type IN (${types.map(() => '?').join(', ')})`)
    .pluck()
    .get(after, ...types) as number;
  db.close();
  return { count, head };
}

let baseline: RunOutcome;
/** A run stopped in round 2 with snapshots every 40 folded events, copied before each test resumes it. */
let stoppedDir: string;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-snapshots-'));
  baseline = await runExperiment({ config: config(), dir: path.join(root, 'baseline'), cacheDir: cacheDir(), snapshotEvery: 0 });
  stoppedDir = path.join(root, 'stopped');
  const stopped = await runExperiment({
    config: config(),
    dir: stoppedDir,
    cacheDir: cacheDir(),
    snapshotEvery: 40,
    stopWhen: (p) => p.round >= 2 && p.events > 0,
  });
  expect(stopped.finished).toBe(false);
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

function copyOfStopped(name: string): string {
  const dir = path.join(root, name);
  cpSync(stoppedDir, dir, { recursive: true });
  return dir;
}

describe('actor snapshots', () => {
  it('a resumed run starts each actor from its snapshot, folds only what came after, and ends as an uninterrupted run', async () => {
    const dir = copyOfStopped('resume');
    const rows = snapshotRows(dir);
    expect([...rows.keys()].sort()).toEqual(ACTORS.map((a) => a.name).sort());
    const expected = new Map(ACTORS.map((a) => [a.name, countFolded(dir, a, rows.get(a.name)!.position)]));
    const reports: RestartReport[] = [];
    const resumed = await runExperiment({ config: config(), dir, cacheDir: cacheDir(), snapshotEvery: 40, onRestart: (r) => reports.push(r) });

    expect(reports.map((r) => r.actor).sort()).toEqual(ACTORS.map((a) => a.name).sort());
    for (const r of reports) {
      const row = rows.get(r.actor)!;
      const { count, head } = expected.get(r.actor)!;
      expect(r.snapshot, r.actor).toBe('used');
      expect(r.from, r.actor).toBe(row.position);
      expect(r.to, r.actor).toBe(head);
      // Exactly the events of its types after the snapshot: none before it is folded again.
      expect(r.eventsFolded, r.actor).toBe(count);
    }
    const judgeAll = countFolded(dir, judge, 0).count;
    expect(reports.find((r) => r.actor === 'judge')!.eventsFolded).toBeLessThan(judgeAll);

    expect(resumed.finished).toBe(true);
    expect(figures(resumed.rows)).toEqual(figures(baseline.rows));
    // Snapshots live beside the log, never in it.
    expect(await eventsOf(dir)).toEqual(await eventsOf(baseline.dir));
  }, 300_000);

  /** The kinds of side rows a run directory's snapshot file holds (the first byte of each key). */
  const sideRowKinds = (dir: string): string[] => {
    const db = new Database(path.join(dir, 'snapshots.db'), { readonly: true });
    const kinds = db.prepare('SELECT DISTINCT substr(key, 1, 1) FROM side_rows').pluck().all() as Buffer[];
    db.close();
    return kinds.map((k) => k.toString());
  };

  /**
   * Resumes a copy of `test/fixtures/<fixture>`, a run directory of this config stopped in round 2
   * by the version that wrote snapshot format `format` (see its README): every actor's snapshot
   * is ignored with its format named, the actors refold from 0 and the run ends with an
   * uninterrupted run's table. `copied` looks at the copy before it is resumed (the fixture itself
   * is never opened: opening a log may write to it). The resumed and the uninterrupted
   * directories are returned.
   */
  async function resumeOlderFormat(fixture: string, format: number, copied: (dir: string) => Promise<void>): Promise<{ dir: string; uninterrupted: string }> {
    const dir = path.join(root, fixture);
    cpSync(path.join(import.meta.dirname, '../fixtures', fixture), dir, { recursive: true });
    await copied(dir);
    const before = snapshotRows(dir);
    expect([...before.values()].map((r) => r.version.split('/')[0])).toEqual(ACTORS.map(() => String(format)));
    const reports: RestartReport[] = [];
    // The fixture's config names its directory as the config file did ('runs'): the run id hashes it.
    const recorded = twoProblemConfig('runs');
    const resumed = await runExperiment({ config: recorded, dir, cacheDir: cacheDir(), snapshotEvery: 40, onRestart: (r) => reports.push(r) });
    expect(reports.map((r) => [r.actor, r.snapshot, r.from]).sort()).toEqual(ACTORS.map((a) => [a.name, 'ignored', 0]).sort());
    for (const r of reports)
      expect(r.ignored).toMatch(
        new RegExp(
          `^its snapshot at position ${before.get(r.actor)!.position} is of version ${format}/[0-9a-f]{12} \\(snapshot format ${format}\\), this ${r.actor} reads ${SNAPSHOT_FORMAT}/`,
        ),
      );
    expect(resumed.finished).toBe(true);
    const uninterrupted = await runExperiment({ config: recorded, dir: path.join(root, `${fixture}-uninterrupted`), cacheDir: cacheDir(), snapshotEvery: 0 });
    expect(figures(resumed.rows)).toEqual(figures(uninterrupted.rows));
    expect(figures(resumed.rows)).toEqual(figures(baseline.rows));
    // The old side rows are gone: the first save of each actor replaced them with the new format's.
    expect(sideRowKinds(dir)).toEqual(['d', 'p']);
    expect([...snapshotRows(dir).values()].every((r) => r.version.startsWith(`${SNAPSHOT_FORMAT}/`))).toBe(true);
    return { dir, uninterrupted: uninterrupted.dir };
  }

  it('a run directory stopped by the version that wrote snapshot format 5 (a side row per result) resumes: its snapshots are ignored with their format named, every actor refolds, the run ends as an uninterrupted one', async () => {
    let evaluatedBefore = 0;
    const { dir, uninterrupted } = await resumeOlderFormat('format5-run', 5, async (copy) => {
      // Its problem-rounds evaluated before it stopped, by a Judge that recorded no candidates' tallies.
      evaluatedBefore = (await eventsOf(copy)).filter((e) => e.type === 'ProblemEvaluated').length;
      expect(evaluatedBefore).toBeGreaterThan(0);
    });
    // The same events, but for the tallies the older Judge did not record.
    let evaluated = 0;
    const withoutEarlyTallies = (e: Decision): Decision => {
      if (e.type !== 'ProblemEvaluated' || evaluated++ >= evaluatedBefore) return e;
      const { candidates: _recordedSince, ...data } = e.data;
      return { ...e, data };
    };
    expect(await eventsOf(dir)).toEqual((await eventsOf(uninterrupted)).map(withoutEarlyTallies));
    // Answer selection counts the resumed log, whose first ProblemEvaluated has no tallies, from
    // its verdicts, and reads the uninterrupted one's tallies: the same tables.
    const [counted, read] = [await answerSelectionBothWays(dir), await answerSelectionBothWays(uninterrupted)];
    expect([counted.source, read.source]).toEqual(['verdicts', 'recorded']);
    expect(counted.recorded).toBe(read.recorded);
    expect(read.recorded).toBe(read.fromVerdicts);
  }, 300_000);

  it('a run directory stopped by the version that wrote snapshot format 7 (side rows keyed by program hash) resumes: its snapshots are ignored with their format named, the run ends with the events of an uninterrupted one', async () => {
    const { dir, uninterrupted } = await resumeOlderFormat('format7-run', 7, async (copy) => {
      expect(sideRowKinds(copy)).toEqual(['h']);
    });
    expect(await eventsOf(dir)).toEqual(await eventsOf(uninterrupted));
  }, 300_000);

  it('an actor whose state is too large for one JSON string is not snapshotted, and the run goes on', async () => {
    const dir = path.join(root, 'too-large');
    cpSync(baseline.dir, dir, { recursive: true });
    const runId = runIdOf(config());
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(path.join(dir, 'too-large-snapshots.db'), runId);
    try {
      // What JSON.stringify throws past V8's longest string (an index of millions of verdicts).
      const tooLarge = {
        ...judge,
        index: {
          ...judge.index!,
          serialize: () => ({
            toJSON: () => {
              throw new RangeError('Invalid string length');
            },
          }),
        },
      };
      const runtime = new ActorRuntime(log, runId, null as never, [tooLarge, solver] as never, { snapshots: { table, every: 1 } });
      await runtime.start();
      // One more event after the start: the next step folds it and takes snapshots.
      await log.append('test', [makeEvent('RunFailed', runId, { reason: 'a test event after the run' })], { commitId: 'too-large/after' });
      expect(await runtime.run()).toBe(true);
      // Skipped at each position it was due (during the start's refold and after the event), never failing the run.
      expect([...new Set(runtime.snapshotsSkipped.map((s) => s.actor))]).toEqual(['judge']);
      expect(runtime.snapshotsSkipped.at(-1)!.position).toBe(runtime.position);
      expect(table.latest('judge')).toBeNull();
      expect(table.latest('solver')).not.toBeNull();
    } finally {
      table.close();
      await log.close();
    }
  }, 120_000);

  it('a restart from a snapshot and a restart from position 0 give identical actor state', async () => {
    const dir = copyOfStopped('same-state');
    const runId = runIdOf(config());
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(path.join(dir, 'snapshots.db'), runId);
    try {
      const reports: RestartReport[] = [];
      // Starting runs no effect, so no environment is needed.
      const fromSnapshot = new ActorRuntime(log, runId, null as never, ACTORS as never, { snapshots: { table, every: 0 }, onRestart: (r) => reports.push(r) });
      await fromSnapshot.start();
      const fromZero = new ActorRuntime(log, runId, null as never, ACTORS as never);
      await fromZero.start();
      expect(reports.every((r) => r.snapshot === 'used' && r.from > 0)).toBe(true);
      expect(fromSnapshot.position).toBe(fromZero.position);
      for (const a of ACTORS) {
        const state = fromSnapshot.persistedStateOf(a.name);
        expect(state, a.name).not.toBeNull();
        expect(JSON.parse(JSON.stringify(state)), a.name).toEqual(JSON.parse(JSON.stringify(fromZero.persistedStateOf(a.name))));
      }
      // The Judge's recorded verdicts live in side rows, not in its body: read through them, the
      // restored index holds what the refolded one does.
      const restored = fromSnapshot.indexOf('judge') as VerdictIndex;
      const refolded = fromZero.indexOf('judge') as VerdictIndex;
      expect(refolded.recorded().length).toBeGreaterThan(0);
      expect(restored.recorded()).toEqual(refolded.recorded());
      // So do the Executor's recorded results.
      const cached = fromSnapshot.indexOf('executor') as ExecutionCache;
      expect(cached.recorded().filter(([k]) => k.startsWith('h')).length).toBeGreaterThan(0);
      expect(cached.recorded()).toEqual((fromZero.indexOf('executor') as ExecutionCache).recorded());
    } finally {
      table.close();
      await log.close();
    }
  }, 120_000);

  it("an actor refolded from position 0 is snapshotted as it folds, so its index holds one interval of results, not the run's", async () => {
    const dir = copyOfStopped('refold-snapshots');
    const runId = runIdOf(config());
    // No usable snapshot: the file is new, as after a corrupt one or a code version bump.
    rmSync(path.join(dir, 'snapshots.db'), { force: true });
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(path.join(dir, 'snapshots.db'), runId);
    const every = 40;
    try {
      const reports: RestartReport[] = [];
      const refolded = new ActorRuntime(log, runId, null as never, ACTORS as never, { snapshots: { table, every }, onRestart: (r) => reports.push(r) });
      await refolded.start();
      const unsnapshotted = new ActorRuntime(log, runId, null as never, ACTORS as never);
      await unsnapshotted.start();
      expect(reports.every((r) => r.snapshot === 'none' && r.from === 0)).toBe(true);
      for (const a of ACTORS)
        expect(JSON.parse(JSON.stringify(refolded.persistedStateOf(a.name))), a.name).toEqual(
          JSON.parse(JSON.stringify(unsnapshotted.persistedStateOf(a.name))),
        );
      // The Judge was snapshotted during the fold, its last snapshot within one interval of the
      // head, and its index holds only what came after it; read through the side rows it
      // answers every verdict the unsnapshotted refold holds in memory.
      const { count: judged, head } = countFolded(dir, judge, 0);
      expect(judged).toBeGreaterThan(2 * every);
      const latest = table.latest('judge');
      expect(latest).not.toBeNull();
      expect(latest!.ref.position).toBeGreaterThan(0);
      expect(latest!.ref.position).toBeLessThanOrEqual(head);
      expect(latest!.ref.position).toBeGreaterThan(head - 2 * every);
      // Never between two events of one commit (a restore would fold the rest of it again).
      const commitAt = (db: Database.Database, position: number) =>
        db.prepare(`SELECT commit_id FROM commits WHERE first_position <= ? ORDER BY first_position DESC LIMIT 1`).pluck().get(position);
      const logDb = new Database(path.join(dir, 'log.db'), { readonly: true });
      expect(commitAt(logDb, latest!.ref.position)).not.toBe(commitAt(logDb, latest!.ref.position + 1));
      logDb.close();
      const index = refolded.indexOf('judge') as VerdictIndex;
      const whole = unsnapshotted.indexOf('judge') as VerdictIndex;
      expect(index.heldEntries).toBeLessThan(whole.heldEntries / 2);
      expect(index.recorded()).toEqual(whole.recorded());
      expect((refolded.indexOf('executor') as ExecutionCache).recorded()).toEqual((unsnapshotted.indexOf('executor') as ExecutionCache).recorded());
      // And those snapshots restart every actor to the same state again.
      const again: RestartReport[] = [];
      const restarted = new ActorRuntime(log, runId, null as never, ACTORS as never, { snapshots: { table, every: 0 }, onRestart: (r) => again.push(r) });
      await restarted.start();
      expect(again.find((r) => r.actor === 'judge')!.snapshot).toBe('used');
      for (const a of ACTORS)
        expect(JSON.parse(JSON.stringify(restarted.persistedStateOf(a.name))), a.name).toEqual(
          JSON.parse(JSON.stringify(unsnapshotted.persistedStateOf(a.name))),
        );
      expect((restarted.indexOf('judge') as VerdictIndex).recorded()).toEqual(whole.recorded());
    } finally {
      table.close();
      await log.close();
    }
  }, 120_000);

  it('the Judge keeps where its recorded verdicts are in the log as side rows of its snapshot, and reads them there after a restart', async () => {
    const dir = copyOfStopped('side-rows');
    const runId = runIdOf(config());
    const file = path.join(dir, 'snapshots.db');
    const sideRows = () => {
      const db = new Database(file, { readonly: true });
      const rows = db.prepare("SELECT key, value FROM side_rows WHERE actor = (SELECT id FROM side_actors WHERE actor = 'judge') ORDER BY key").raw().all() as [
        Buffer,
        Buffer,
      ][];
      db.close();
      return rows;
    };
    // Rows per problem and program (a head keyed by 'h', the problem's length and UTF-8, the
    // program hash, then its sealed parts): its load outcome, the positions of the events that
    // recorded its verdicts and its tests' fingerprints.
    const stored = entriesOfRows(sideRows()).map(({ scope, program, entry }) => ({ problemId: scope, programHash: program, entry }));
    expect(stored.length).toBeGreaterThan(0);
    const withVerdicts = stored.filter((r) => r.entry.events.length > 0);
    expect(withVerdicts.length).toBeGreaterThan(0);
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    // Each names ProgramExecuted events of its program, each after the request it names.
    for (const { programHash, entry } of withVerdicts.slice(0, 20)) {
      const events = await log.readAt!(entry.events.filter((_, i) => i % 2 === 0) as never);
      for (const e of events) expect(e).toMatchObject({ type: 'ProgramExecuted', data: { programHash } });
      for (let i = 0; i < entry.events.length; i += 2) expect(entry.events[i + 1]).toBeLessThan(entry.events[i]!);
    }
    const table = new SqliteSnapshotTable(file, runId);
    const restart = async () => {
      const runtime = new ActorRuntime(log, runId, null as never, [judge] as never, { snapshots: { table, every: 0 } });
      await runtime.start();
      return runtime.indexOf('judge') as VerdictIndex;
    };
    try {
      const index = await restart();
      // Every program's recorded verdicts are read back from the log after the restart.
      const log2 = log;
      for (const { problemId, programHash, entry } of withVerdicts) {
        // Each test the row names, by the request its event answers.
        const tests: string[] = [];
        for (let i = 0; i < entry.events.length; i += 2) {
          const [request] = await log2.readAt!([entry.events[i + 1]!] as never);
          for (const t of (request!.data as { tests: { testHash: string }[] }).tests) if (entry.tests.has(fingerprintOf(t.testHash))) tests.push(t.testHash);
        }
        const recorded = await index.resultsOf(
          problemId,
          tests.map((testHash) => ({ programHash, testHash })),
        );
        expect(recorded.byProgram.get(programHash)?.size).toBe(entry.tests.size);
      }
      const before = index.recorded().length;
      expect(before).toBe(stored.length);
      // Side rows and body are one state: without the rows the restored index lacks those programs.
      const db = new Database(file);
      db.prepare("DELETE FROM side_rows WHERE actor = (SELECT id FROM side_actors WHERE actor = 'judge')").run();
      db.close();
      const without = await restart();
      expect(without.recorded()).toEqual([]);
      const { problemId, programHash } = withVerdicts[0]!;
      const { entry } = withVerdicts[0]!;
      const [request] = await log.readAt!([entry.events[1]!] as never);
      const asked = (request!.data as { tests: { testHash: string }[] }).tests.map((t) => ({ programHash, testHash: t.testHash }));
      expect((await index.resultsOf(problemId, asked)).byProgram.size).toBe(1);
      expect((await without.resultsOf(problemId, asked)).byProgram.size).toBe(0);
    } finally {
      table.close();
      await log.close();
    }
  }, 120_000);

  it('a snapshot file of the format before (side rows as text) is not read: every actor refolds from the start to the same state', async () => {
    const dir = copyOfStopped('old-format');
    const runId = runIdOf(config());
    const file = path.join(dir, 'snapshots.db');
    // The file as format 1 left it: its version strings, and side rows with text keys and JSON
    // values in a table of their own (here made of this run's rows, every verdict said accepted).
    const db = new Database(file);
    db.exec("UPDATE actor_snapshots SET version = '1' || substr(version, instr(version, '/'))");
    db.exec(
      'CREATE TABLE actor_side (run_id TEXT NOT NULL, actor TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, sum INTEGER NOT NULL, PRIMARY KEY (run_id, actor, key)) WITHOUT ROWID',
    );
    const old = db.prepare('INSERT INTO actor_side VALUES (?, ?, ?, \'["accepted",1,1,null,null,true]\', 0)');
    for (const [actor, key] of db.prepare('SELECT a.actor, r.key FROM side_rows r JOIN side_actors a ON a.id = r.actor').raw().all() as [string, Buffer][])
      old.run(runId, actor, key.toString('hex'));
    db.exec('DROP TABLE side_rows; DROP TABLE side_actors');
    db.close();
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(file, runId);
    try {
      const reports: RestartReport[] = [];
      const fromOld = new ActorRuntime(log, runId, null as never, ACTORS as never, { snapshots: { table, every: 0 }, onRestart: (r) => reports.push(r) });
      await fromOld.start();
      const fromZero = new ActorRuntime(log, runId, null as never, ACTORS as never);
      await fromZero.start();
      expect(reports.map((r) => [r.actor, r.snapshot, r.from]).sort()).toEqual(ACTORS.map((a) => [a.name, 'ignored', 0]).sort());
      for (const a of ACTORS)
        expect(JSON.parse(JSON.stringify(fromOld.persistedStateOf(a.name))), a.name).toEqual(JSON.parse(JSON.stringify(fromZero.persistedStateOf(a.name))));
      const judged = fromOld.indexOf('judge') as VerdictIndex;
      expect(judged.recorded().length).toBeGreaterThan(0);
      expect(judged.recorded()).toEqual((fromZero.indexOf('judge') as VerdictIndex).recorded());
      expect((fromOld.indexOf('executor') as ExecutionCache).recorded()).toEqual((fromZero.indexOf('executor') as ExecutionCache).recorded());
    } finally {
      table.close();
      await log.close();
    }
    // Its rows are dropped when the file is opened: never read again.
    const after = new Database(file, { readonly: true });
    expect(after.prepare("SELECT name FROM sqlite_schema WHERE name = 'actor_side'").get()).toBeUndefined();
    after.close();
  }, 120_000);

  it('a snapshot table writes side rows with their body, a replacing save drops the rows before, and a corrupt row is refused', () => {
    const file = path.join(root, 'side-table.db');
    const table = new SqliteSnapshotTable(file, 'run-a');
    const other = new SqliteSnapshotTable(file, 'run-b');
    try {
      const ref = (position: number) => ({ actor: 'judge', position: position as never, hash: 'a'.repeat(64), version: 'v' });
      const rows = (...kv: [string, string][]) => kv.map(([k, v]) => [Buffer.from(k), Buffer.from(v)] as const);
      const text = (it: Iterable<[Uint8Array, Uint8Array]>) => [...it].map(([k, v]) => [Buffer.from(k).toString(), Buffer.from(v).toString()]);
      table.save([{ ref: ref(1), body: Buffer.from('{}'), side: { replace: true, rows: rows(['x', '1'], ['y', '2']) } }]);
      other.save([{ ref: ref(1), body: Buffer.from('{}'), side: { replace: true, rows: rows(['x', 'other run']) } }]);
      table.save([{ ref: ref(2), body: Buffer.from('{}'), side: { replace: false, rows: rows(['y', '3'], ['z', '4']) } }]);
      expect(text(table.side('judge').all())).toEqual([
        ['x', '1'],
        ['y', '3'],
        ['z', '4'],
      ]);
      expect(Buffer.from(table.side('judge').get(Buffer.from('y'))!).toString()).toBe('3');
      expect(table.side('executor').get(Buffer.from('y'))).toBeUndefined();
      // Many keys at once (more than one statement's worth, repeated and missing ones among
      // them): what `get` answers for each, in order.
      const many = [...Array.from({ length: 150 }, (_, i) => Buffer.from(['x', 'y', 'q', 'z'][i % 4]!)), Buffer.from('y')];
      expect(
        table
          .side('judge')
          .getMany(many)
          .map((v) => (v === undefined ? null : Buffer.from(v).toString())),
      ).toEqual(many.map((k) => ({ x: '1', y: '3', z: '4' })[k.toString()] ?? null));
      expect(table.side('judge').getMany([])).toEqual([]);
      expect(table.side('executor').getMany([Buffer.from('x')])).toEqual([undefined]);
      table.save([{ ref: ref(3), body: Buffer.from('{}'), side: { replace: true, rows: rows(['w', '5']) } }]);
      expect(text(table.side('judge').all())).toEqual([['w', '5']]);
      // Another run's rows are its own.
      expect(text(other.side('judge').all())).toEqual([['x', 'other run']]);
      expect(table.latest('judge')!.ref.position).toBe(3);
      // A changed value no longer matches its checksum: refused, naming the row (its key in hex).
      const db = new Database(file);
      db.prepare(
        "UPDATE side_rows SET value = X'36' WHERE actor = (SELECT id FROM side_actors WHERE run_id = 'run-a' AND actor = 'judge') AND key = X'77'",
      ).run();
      db.close();
      expect(() => table.side('judge').get(Buffer.from('w'))).toThrow(SideRowCorruptError);
      expect(() => table.side('judge').getMany([Buffer.from('v'), Buffer.from('w')])).toThrow(SideRowCorruptError);
      expect(() => [...table.side('judge').all()]).toThrow(/side row 77 of actor judge's snapshot is corrupt/);
    } finally {
      table.close();
      other.close();
    }
  });

  it('a snapshot whose stored context is of another shape is refused, naming the actor and the path, and the actor refolds to the state of a fresh fold', async () => {
    const dir = copyOfStopped('other-shape');
    const runId = runIdOf(config());
    const file = path.join(dir, 'snapshots.db');
    // Bodies rewritten as an older code's would be, each still hashing to its recorded sha256
    // and carrying this code's version: only their content tells.
    const db = new Database(file);
    const reshape = (actor: string, change: (context: Record<string, unknown>) => void) => {
      const body = JSON.parse(decodeBody(db.prepare('SELECT body FROM actor_snapshots WHERE actor = ?').pluck().get(actor) as Buffer)) as {
        machine: { context: Record<string, unknown> };
      };
      change(body.machine.context);
      const bytes = Buffer.from(JSON.stringify(body));
      db.prepare('UPDATE actor_snapshots SET body = ?, hash = ? WHERE actor = ?').run(bytes, createHash('sha256').update(bytes).digest('hex'), actor);
    };
    // A renamed field,
    reshape('judge', (c) => {
      c.mistakeBook = c.mistakeBooks;
      delete c.mistakeBooks;
    });
    // and a field of another type.
    reshape('conductor', (c) => {
      c.round = String(c.round);
    });
    db.close();
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(file, runId);
    try {
      const reports: RestartReport[] = [];
      const restarted = new ActorRuntime(log, runId, null as never, ACTORS as never, { snapshots: { table, every: 0 }, onRestart: (r) => reports.push(r) });
      await restarted.start();
      const fresh = new ActorRuntime(log, runId, null as never, ACTORS as never);
      await fresh.start();
      const byActor = new Map(reports.map((r) => [r.actor, r]));
      const judged = byActor.get('judge')!;
      expect(judged.snapshot).toBe('refused');
      expect(judged.from).toBe(0);
      expect(judged.refused?.message).toMatch(
        /^snapshot of actor judge at position \d+ \(sha256 [0-9a-f]{12}\) refused: its state does not match the schema: judge\.context\.mistakeBooks: /,
      );
      expect(judged.refused?.message).toMatch(/judge refolds the log from the start$/);
      const conducted = byActor.get('conductor')!;
      expect(conducted.snapshot).toBe('refused');
      expect(conducted.refused?.message).toMatch(/its state does not match the schema: conductor\.context\.round: /);
      for (const name of ['solver', 'adversary', 'executor', 'learner']) expect(byActor.get(name)!.snapshot, name).toBe('used');
      for (const a of ACTORS)
        expect(JSON.parse(JSON.stringify(restarted.persistedStateOf(a.name))), a.name).toEqual(JSON.parse(JSON.stringify(fresh.persistedStateOf(a.name))));
      expect((restarted.indexOf('judge') as VerdictIndex).recorded()).toEqual((fresh.indexOf('judge') as VerdictIndex).recorded());
    } finally {
      table.close();
      await log.close();
    }
  }, 120_000);

  it("a change to an actor's context schema sets another snapshot version: its snapshot is ignored and it refolds from the start", async () => {
    const dir = copyOfStopped('schema-change');
    const runId = runIdOf(config());
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    const table = new SqliteSnapshotTable(path.join(dir, 'snapshots.db'), runId);
    try {
      // The same Judge, its context schema with one more (optional) field.
      const changed = { ...judge, context: JudgeContext.extend({ note: z.string().optional() }) };
      const reports: RestartReport[] = [];
      const restarted = new ActorRuntime(log, runId, null as never, [changed, solver] as never, {
        snapshots: { table, every: 0 },
        onRestart: (r) => reports.push(r),
      });
      await restarted.start();
      expect(reports.map((r) => [r.actor, r.snapshot, r.from === 0]).sort()).toEqual([
        ['judge', 'ignored', true],
        ['solver', 'used', false],
      ]);
      const fresh = new ActorRuntime(log, runId, null as never, [judge] as never);
      await fresh.start();
      expect(JSON.parse(JSON.stringify(restarted.persistedStateOf('judge')))).toEqual(JSON.parse(JSON.stringify(fresh.persistedStateOf('judge'))));
    } finally {
      table.close();
      await log.close();
    }
  }, 120_000);

  it('large bodies are stored deflated and read back; a body that is neither JSON nor deflated JSON is refused by name', () => {
    const small = JSON.stringify({ a: 1 });
    expect(encodeBody(small).toString()).toBe(small);
    const large = JSON.stringify({
      samples: Array.from({ length: 5_000 }, (_, i) => ({
        id: `s${i}`,
        hash: createHash('sha256')
          .update(String(i % 50))
          .digest('hex'),
      })),
    });
    const stored = encodeBody(large);
    expect(stored[0]).toBe(0x78);
    expect(stored.length).toBeLessThan(large.length / 4);
    expect(decodeBody(stored)).toBe(large);
    expect(decodeBody(encodeBody(small, 0))).toBe(small);
    expect(() => decodeBody(Buffer.from('[1]'))).toThrow(/neither JSON text nor deflated JSON \(first byte 0x5b\)/);
    expect(() => decodeBody(stored.subarray(0, 100))).toThrow(/does not inflate/);
  });

  it('a run resumes from deflated bodies; a deflated body that does not inflate is refused, and its actor refolds', async () => {
    const dir = copyOfStopped('deflated');
    const rows = snapshotRows(dir);
    const db = new Database(path.join(dir, 'snapshots.db'));
    for (const actor of rows.keys()) {
      const text = decodeBody(db.prepare('SELECT body FROM actor_snapshots WHERE actor = ?').pluck().get(actor) as Buffer);
      // Every body deflated, as a large one is; the Judge's cut short, yet hashing to its record.
      let bytes = encodeBody(text, 0);
      if (actor === 'judge') bytes = bytes.subarray(0, bytes.length - 8);
      db.prepare('UPDATE actor_snapshots SET body = ?, hash = ? WHERE actor = ?').run(bytes, createHash('sha256').update(bytes).digest('hex'), actor);
    }
    db.close();
    const reports: RestartReport[] = [];
    const resumed = await runExperiment({ config: config(), dir, cacheDir: cacheDir(), snapshotEvery: 40, onRestart: (r) => reports.push(r) });
    const byActor = new Map(reports.map((r) => [r.actor, r]));
    expect(byActor.get('judge')!.snapshot).toBe('refused');
    expect(byActor.get('judge')!.refused?.message).toMatch(/refused: its body cannot be read: it does not inflate/);
    for (const name of ['conductor', 'solver', 'adversary', 'executor', 'learner']) {
      expect(byActor.get(name)!.snapshot, name).toBe('used');
      expect(byActor.get(name)!.from, name).toBe(rows.get(name)!.position);
    }
    expect(resumed.finished).toBe(true);
    expect(figures(resumed.rows)).toEqual(figures(baseline.rows));
  }, 300_000);

  it("a corrupt snapshot is refused with an error naming it, and another version's is ignored: both refold from the start", async () => {
    const dir = copyOfStopped('corrupt');
    const rows = snapshotRows(dir);
    const judgeHash = rows.get('judge')!.hash;
    const snapDb = new Database(path.join(dir, 'snapshots.db'));
    // One flipped letter inside the Judge's state: still JSON, still a snapshot, wrong content.
    const flipped = snapDb
      .prepare("UPDATE actor_snapshots SET body = CAST(replace(CAST(body AS TEXT), '\"mistakeBooks\"', '\"mistakeBoOks\"') AS BLOB) WHERE actor = 'judge'")
      .run();
    expect(flipped.changes).toBe(1);
    const body = snapDb.prepare("SELECT body FROM actor_snapshots WHERE actor = 'judge'").pluck().get() as Buffer;
    expect(createHash('sha256').update(body).digest('hex')).not.toBe(judgeHash);
    snapDb.prepare("UPDATE actor_snapshots SET version = '1/0.0.1/1/000000000000' WHERE actor = 'executor'").run();
    snapDb.close();

    const reports: RestartReport[] = [];
    const resumed = await runExperiment({ config: config(), dir, cacheDir: cacheDir(), snapshotEvery: 0, onRestart: (r) => reports.push(r) });
    const byActor = new Map(reports.map((r) => [r.actor, r]));
    const judged = byActor.get('judge')!;
    expect(judged.snapshot).toBe('refused');
    expect(judged.refused?.message).toMatch(
      new RegExp(`^snapshot of actor judge at position ${rows.get('judge')!.position} \\(sha256 ${judgeHash.slice(0, 12)}\\) refused: its body is corrupt`),
    );
    expect(judged.refused?.message).toMatch(/judge refolds the log from the start/);
    expect(judged.from).toBe(0);
    expect(judged.eventsFolded).toBe(countFolded(dir, judge, 0).count - countFolded(dir, judge, judged.to).count);
    const executed = byActor.get('executor')!;
    expect(executed.snapshot).toBe('ignored');
    expect(executed.from).toBe(0);
    for (const name of ['conductor', 'solver', 'adversary', 'learner']) expect(byActor.get(name)!.snapshot, name).toBe('used');

    expect(resumed.finished).toBe(true);
    expect(figures(resumed.rows)).toEqual(figures(baseline.rows));
  }, 300_000);
});
