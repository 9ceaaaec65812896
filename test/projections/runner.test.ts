import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isEvent, makeEvent } from '../../src/events/catalog.js';
import { NotACrucibleLogError } from '../../src/events/errors.js';
import { asPosition } from '../../src/events/log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/events/sqlite/sqlite-log.js';
import { eventCounts, type EventCountRow } from '../../src/projections/event-counts.js';
import { NotAReadModelError, ReadModel, add, del, merge, put } from '../../src/projections/readmodel.js';
import { ProjectionError, ProjectionRunner, ReadModelOfAnotherLogError, type ReducerProjection, type RowProjection } from '../../src/projections/runner.js';

const repoRoot = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');

let dir: string;
let log: SqliteEventLog;
const open: ProjectionRunner[] = [];
const runner = async (opts: Partial<Parameters<typeof ProjectionRunner.open>[0]> = {}) => {
  const r = await ProjectionRunner.open({ log, readModel: join(dir, 'rm.db'), projections: [eventCounts], ...opts });
  open.push(r);
  return r;
};

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'crucible-proj-'));
  log = await openSqliteLog(join(dir, 'log.db'), { pollIntervalMs: 10, synchronous: 'normal' });
});
afterEach(async () => {
  for (const r of open.splice(0)) await r.close();
  await log.close();
  rmSync(dir, { recursive: true, force: true });
});

/** n events cycling over three types and two runs, in commits of `per`. */
async function seed(n: number, per = 10, start = 0): Promise<void> {
  for (let c = 0; c * per < n; c++) {
    const events = Array.from({ length: Math.min(per, n - c * per) }, (_, i) => {
      const k = start + c * per + i;
      const run = k % 2 ? 'run-b' : 'run-a';
      return k % 3 === 0
        ? makeEvent('RoundStarted', run, { round: k, problemIds: [] })
        : k % 3 === 1
          ? makeEvent('RoundCompleted', run, { round: k })
          : makeEvent('RunFailed', run, { reason: `r${k}` });
    });
    await log.append(`s/${c % 3}`, events, { commitId: `seed-${start}-${c}` });
  }
}

/** Counts straight from the log, to check the projection against. */
async function expectedCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for await (const e of log.read()) out[`${e.runId}/${e.type}`] = (out[`${e.runId}/${e.type}`] ?? 0) + 1;
  return out;
}

async function counts(r: ProjectionRunner): Promise<Record<string, number>> {
  const rows = await r.readModel.query<{ event_counts: EventCountRow }>().selectFrom('event_counts').selectAll().execute();
  return Object.fromEntries(rows.map((x) => [`${x.run_id}/${x.type}`, x.events]));
}

describe('catch-up', () => {
  it('applies every event once, in batches, and resumes from its checkpoint', async () => {
    await seed(53);
    const batches: number[] = [];
    const r = await runner({ batchSize: 7, onBatch: (p) => batches.push(p) });
    expect(await r.catchUp()).toBe(53);
    expect(batches).toEqual([7, 14, 21, 28, 35, 42, 49, 53]);
    expect(await counts(r)).toEqual(await expectedCounts());
    expect(r.checkpoint('event-counts')).toBe(53);
    await seed(20, 10, 1000);
    expect(await r.catchUp()).toBe(73);
    expect(await counts(r)).toEqual(await expectedCounts());
    // Nothing new: nothing applied twice.
    expect(await r.catchUp()).toBe(73);
    expect(await counts(r)).toEqual(await expectedCounts());
  });

  it('keeps its checkpoint across reopening', async () => {
    await seed(30);
    const r = await runner();
    await r.catchUp({ to: asPosition(12) });
    await r.close();
    open.splice(0);
    const again = await runner();
    expect(again.checkpoint('event-counts')).toBe(12);
    await again.catchUp();
    expect(await counts(again)).toEqual(await expectedCounts());
  });

  it('a failing batch leaves no trace: checkpoint and rows stay at the last committed batch', async () => {
    await seed(40);
    const poisoned: RowProjection = {
      ...eventCounts,
      apply: (e, view) => {
        if (e.position === 26) throw new Error('poison');
        return eventCounts.apply(e, view);
      },
    };
    const r = await runner({ projections: [poisoned], batchSize: 10 });
    const err = await r.catchUp().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProjectionError);
    expect(err).toMatchObject({ projection: 'event-counts', position: 26 });
    expect(r.checkpoint('event-counts')).toBe(20);
    const total = Object.values(await counts(r)).reduce((a, b) => a + b, 0);
    expect(total).toBe(20);
    await r.close();
    open.splice(0);
    // Fixed code, same name and version: continues from 20 and ends where a full replay ends.
    const fixed = await runner();
    await fixed.catchUp();
    const fresh = await ProjectionRunner.replayInto(join(dir, 'fresh.db'), { log, projections: [eventCounts] });
    open.push(fresh);
    expect(await fixed.stateHash('event-counts')).toBe(await fresh.stateHash('event-counts'));
  });

  it('a process killed between batches resumes without loss or double counting', async () => {
    await seed(95);
    const child = `
      import { openSqliteLog } from './src/events/sqlite/sqlite-log.ts';
      import { ProjectionRunner } from './src/projections/runner.ts';
      import { eventCounts } from './src/projections/event-counts.ts';
      const log = await openSqliteLog(process.env.LOG);
      let batches = 0;
      const r = await ProjectionRunner.open({ log, readModel: process.env.RM, projections: [eventCounts], batchSize: 10,
        onBatch: () => { if (++batches === 4) process.kill(process.pid, 'SIGKILL'); } });
      await r.catchUp();
      console.log('not killed');
    `;
    const signal = await new Promise<string | null>((res, rej) => {
      const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child], {
        cwd: repoRoot,
        env: { ...process.env, LOG: join(dir, 'log.db'), RM: join(dir, 'rm.db') },
        stdio: 'inherit',
      });
      p.on('error', rej);
      p.on('exit', (_code, sig) => res(sig));
    });
    expect(signal).toBe('SIGKILL');
    const r = await runner();
    expect(r.checkpoint('event-counts')).toBe(40);
    expect(Object.values(await counts(r)).reduce((a, b) => a + b, 0)).toBe(40);
    await r.catchUp();
    expect(await counts(r)).toEqual(await expectedCounts());
  });

  it('reports a bad row write naming the projection, position, table and column', async () => {
    await seed(3);
    const bad: RowProjection = {
      name: 'bad',
      version: 1,
      tables: { bad_rows: { columns: { k: 'text', n: 'integer' }, key: ['k'] } },
      apply: (e) => [put('bad_rows', { k: e.id, n: e.position === 2 ? 'two' : e.position })],
    };
    const r = await runner({ projections: [bad] });
    const err = await r.catchUp().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProjectionError);
    expect(String(err)).toMatch(/"bad" at event position 2.*bad_rows\.n is integer/);
    expect(r.checkpoint('bad')).toBe(0);
  });
});

describe('row writes', () => {
  // Per stream: last type seen (merge), events (add), a JSON list of rounds (read-modify-put through
  // the view), and the row is deleted when a RunFailed says "forget".
  const streams: RowProjection = {
    name: 'streams',
    version: 1,
    tables: {
      stream_info: {
        columns: { stream: 'text', last_type: 'text?', events: 'integer', rounds: 'json?', flagged: 'boolean' },
        key: ['stream'],
      },
    },
    apply: (e, view) => {
      const key = { stream: e.stream };
      if (isEvent(e, 'RunFailed') && e.data.reason === 'forget') return [del('stream_info', key)];
      const out = [add('stream_info', key, { events: 1 }), merge('stream_info', { ...key, last_type: e.type })];
      if (isEvent(e, 'RoundStarted')) {
        const before = view.get('stream_info', key);
        const rounds = [...((before?.rounds as number[] | undefined) ?? []), e.data.round];
        out.push(merge('stream_info', { ...key, rounds, flagged: rounds.length > 2 }));
      }
      return out;
    },
  };

  it('put, merge, add and delete do what they say, and batching does not change the result', async () => {
    for (const [i, s] of ['a', 'b', 'a', 'c', 'a', 'b', 'a'].entries()) {
      await log.append(s, [makeEvent('RoundStarted', 'r', { round: i, problemIds: [] }), makeEvent('RoundCompleted', 'r', { round: i })], {
        commitId: `x${i}`,
      });
    }
    await log.append('c', [makeEvent('RunFailed', 'r', { reason: 'forget' })], { commitId: 'forget' });
    await log.append('b', [makeEvent('RunFailed', 'r', { reason: 'keep' })], { commitId: 'keep' });
    const big = await runner({ projections: [streams], batchSize: 1000 });
    await big.catchUp();
    const rows = await big.readModel.kysely.selectFrom('stream_info').selectAll().orderBy('stream').execute();
    expect(rows).toEqual([
      { stream: 'a', last_type: 'RoundCompleted', events: 8, rounds: '[0,2,4,6]', flagged: 1 },
      { stream: 'b', last_type: 'RunFailed', events: 5, rounds: '[1,5]', flagged: 0 },
    ]);
    const one = await ProjectionRunner.replayInto(join(dir, 'one.db'), { log, projections: [streams], batchSize: 1 });
    open.push(one);
    expect(await one.stateHash('streams')).toBe(await big.stateHash('streams'));
  });

  it('refuses writes to undeclared tables and rows missing required columns', async () => {
    await seed(2);
    const stray: RowProjection = { ...eventCounts, name: 'stray', tables: {}, apply: () => [put('nowhere', { a: 1 })] };
    const r = await runner({ projections: [stray] });
    await expect(r.catchUp()).rejects.toThrow(/"stray" at event position 1.*table "nowhere"/);
    const partial: RowProjection = {
      name: 'partial',
      version: 1,
      tables: { partial_rows: { columns: { k: 'text', label: 'text' }, key: ['k'] } },
      apply: (e) => [add('partial_rows', { k: e.id }, {})],
    };
    const r2 = await runner({ projections: [partial], readModel: join(dir, 'rm2.db') });
    await expect(r2.catchUp()).rejects.toThrow(/without column "label"/);
  });

  it("refuses a projection's reads and writes of another projection's table, naming both", async () => {
    await seed(7);
    const owner: RowProjection = {
      name: 'owner',
      version: 1,
      tables: { owned: { columns: { k: 'text', position: 'integer' }, key: ['k'] } },
      apply: (e) => [put('owned', { k: e.id, position: e.position })],
    };
    const writer: RowProjection = { name: 'writer', version: 1, tables: {}, apply: (e) => [put('owned', { k: e.id, position: 0 })] };
    const r3 = await runner({ projections: [owner, writer], readModel: join(dir, 'rm3.db') });
    await expect(r3.catchUp()).rejects.toThrow(/"writer" at event position 1.*table "owned", which it does not declare/);
    const reader: RowProjection = { name: 'reader', version: 1, tables: {}, apply: (e, view) => (view.get('owned', { k: e.id }), []) };
    const r4 = await runner({ projections: [owner, reader], readModel: join(dir, 'rm4.db') });
    await expect(r4.catchUp()).rejects.toThrow(/"reader" at event position 1.*reads table "owned", which it does not declare/);
  });
});

describe('state hash and rebuild', () => {
  it('equal data gives an equal hash whatever the insertion order; other data, another hash', async () => {
    const mk = (types: string[]) =>
      types.map((t, i) => (t === 'A' ? makeEvent('RunFailed', 'r', { reason: String(i) }) : makeEvent('RoundCompleted', 'r', { round: i })));
    const hashOf = async (name: string, events: ReturnType<typeof mk>) => {
      const l = await openSqliteLog(join(dir, `${name}.log`));
      for (const [i, e] of events.entries()) await l.append('s', [e], { commitId: `c${i}` });
      const r = await ProjectionRunner.replayInto(join(dir, `${name}.rm`), { log: l, projections: [countsOnly] });
      const h = await r.stateHash('counts-only');
      await r.close();
      await l.close();
      return h;
    };
    const countsOnly: RowProjection = { ...eventCounts, name: 'counts-only', apply: (e, v) => eventCounts.apply(e, v).slice(0, 1) };
    const h1 = await hashOf('one', mk(['A', 'B', 'A', 'B', 'B']));
    const h2 = await hashOf('two', mk(['B', 'B', 'A', 'B', 'A']));
    const h3 = await hashOf('three', mk(['B', 'B', 'A', 'B', 'B']));
    expect(h1).toMatch(/^[0-9a-f]{64}$/);
    expect(h2).toBe(h1);
    expect(h3).not.toBe(h1);
  });

  it('a blob column stores bytes, reads them back, hashes them by content and refuses other values', async () => {
    const bytesOf: RowProjection = {
      name: 'bytes-of',
      version: 1,
      types: ['RunFailed'],
      tables: { bytes_of: { columns: { reason: 'text', bytes: 'blob' }, key: ['reason'] } },
      apply: (e) => {
        const reason = (e.data as { reason: string }).reason;
        return [{ op: 'put', table: 'bytes_of', row: { reason, bytes: reason === 'bad' ? 'not bytes' : Buffer.from(reason, 'utf8') } }];
      },
    };
    const replay = async (name: string, reasons: string[]) => {
      const l = await openSqliteLog(join(dir, `${name}.log`));
      for (const [i, reason] of reasons.entries()) await l.append('s', [makeEvent('RunFailed', 'r', { reason })], { commitId: `c${i}` });
      try {
        const r = await ProjectionRunner.replayInto(join(dir, `${name}.rm`), { log: l, projections: [bytesOf] });
        const h = await r.stateHash('bytes-of');
        const row = r.readModel.db.prepare('SELECT bytes FROM bytes_of WHERE reason = ?').get('é') as { bytes: Buffer } | undefined;
        await r.close();
        return { h, row };
      } finally {
        await l.close();
      }
    };
    const one = await replay('blob-one', ['x', 'é']);
    expect(one.row?.bytes).toEqual(Buffer.from('é', 'utf8'));
    expect((await replay('blob-two', ['é', 'x'])).h).toBe(one.h);
    expect((await replay('blob-three', ['y', 'é'])).h).not.toBe(one.h);
    await expect(replay('blob-bad', ['bad'])).rejects.toThrow(/bytes_of\.bytes is blob, got the string "not bytes"/);
  });

  it('live mode and a rebuild from zero end with the same hash', async () => {
    await seed(25);
    const r = await runner({ batchSize: 8 });
    r.start();
    await r.waitFor(asPosition(25));
    for (let i = 0; i < 10; i++) {
      await seed(7, 3, 100 + i * 10);
      if (i % 3 === 0) await new Promise((res) => setTimeout(res, 2));
    }
    await r.waitFor(await log.head());
    expect(r.error).toBeNull();
    expect(await counts(r)).toEqual(await expectedCounts());
    const live = await r.stateHash('event-counts');
    await r.stop();
    const fresh = await ProjectionRunner.replayInto(join(dir, 'fresh.db'), { log, projections: [eventCounts] });
    open.push(fresh);
    expect(await fresh.stateHash('event-counts')).toBe(live);
    expect(await r.rebuild()).toBe(await log.head());
    expect(await r.stateHash('event-counts')).toBe(live);
  });

  it('a changed version forces a rebuild; changed tables under the same version are refused', async () => {
    await seed(12);
    const r = await runner();
    await r.catchUp();
    await r.close();
    open.splice(0);
    const doubled: RowProjection = {
      ...eventCounts,
      version: 2,
      apply: (e, v) => [...eventCounts.apply(e, v), ...eventCounts.apply(e, v).slice(0, 1)],
    };
    const r2 = await runner({ projections: [doubled] });
    expect(r2.rebuilt).toEqual(['event-counts']);
    expect(r2.checkpoint('event-counts')).toBe(0);
    expect(await counts(r2)).toEqual({});
    await r2.catchUp();
    const want = Object.fromEntries(Object.entries(await expectedCounts()).map(([k, n]) => [k, 2 * n]));
    expect(await counts(r2)).toEqual(want);
    await r2.close();
    open.splice(0);
    const sneaky: RowProjection = {
      ...doubled,
      tables: { event_counts: { ...doubled.tables.event_counts!, columns: { ...doubled.tables.event_counts!.columns, extra: 'text?' } } },
    };
    await expect(runner({ projections: [sneaky] })).rejects.toThrow(/bump the version/);
  });
});

describe('retired read models', () => {
  it("drops the tables and checkpoint of a read model named retired, and leaves another runner's alone", async () => {
    await seed(30);
    const other: RowProjection = {
      name: 'other-counts',
      version: 1,
      tables: { other_counts: { columns: { type: 'text' }, key: ['type'] } },
      apply: (e) => [put('other_counts', { type: e.type })],
    };
    const both = await runner({ projections: [eventCounts, other] });
    await both.catchUp();
    await both.close();
    open.splice(0);
    const tables = () => {
      const db = new Database(join(dir, 'rm.db'), { readonly: true });
      try {
        const names = db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE '%counts'`).pluck().all();
        const checkpoints = db.prepare('SELECT name FROM crucible_projections ORDER BY name').pluck().all();
        return { names: (names as string[]).sort(), checkpoints };
      } finally {
        db.close();
      }
    };
    // A runner of some projections keeps the others' tables.
    await (await runner({ projections: [eventCounts] })).close();
    open.splice(0);
    expect(tables()).toEqual({ names: ['event_counts', 'other_counts'], checkpoints: ['event-counts', 'other-counts'] });
    // Named retired, they go; what the runner builds stays as it was.
    const kept = await runner({ projections: [eventCounts], retired: ['other-counts', 'never-built'] });
    expect(await counts(kept)).toEqual(await expectedCounts());
    expect(tables()).toEqual({ names: ['event_counts'], checkpoints: ['event-counts'] });
    await expect(runner({ projections: [eventCounts], retired: ['event-counts'] })).rejects.toThrow(
      /read model "event-counts" is both built and named retired/,
    );
  });
});

describe('reducer projections', () => {
  interface Rounds {
    started: number[];
    failures: number;
  }
  const rounds: ReducerProjection<Rounds> = {
    name: 'rounds',
    version: 1,
    types: ['RoundStarted', 'RunFailed'],
    initial: () => ({ started: [], failures: 0 }),
    reduce: (s, e) => (isEvent(e, 'RoundStarted') ? { ...s, started: [...s.started, e.data.round] } : { ...s, failures: s.failures + 1 }),
    tables: { rounds_started: { columns: { round: 'integer', odd: 'boolean' }, key: ['round'] } },
    rows: (s) => ({ rounds_started: s.started.filter((x) => x < 30).map((round) => ({ round, odd: round % 2 === 1 })) }),
  };

  it('keeps its state with the checkpoint, shows it as tables, and replays to the same hash', async () => {
    await seed(40);
    const r = await runner({ projections: [rounds, eventCounts], batchSize: 9 });
    await r.catchUp({ to: asPosition(20) });
    await r.close();
    open.splice(0);
    const again = await runner({ projections: [rounds, eventCounts], batchSize: 9 });
    expect(again.state<Rounds>('rounds').started).toEqual([0, 3, 6, 9, 12, 15, 18]);
    await again.catchUp();
    const s = again.state<Rounds>('rounds');
    expect(s.started).toEqual(Array.from({ length: 14 }, (_, i) => i * 3));
    expect(s.failures).toBe(13);
    const shown = await again.readModel.kysely.selectFrom('rounds_started').selectAll().orderBy('round').execute();
    expect(shown.map((x) => x.round)).toEqual([0, 3, 6, 9, 12, 15, 18, 21, 24, 27]);
    expect(shown[1]).toEqual({ round: 3, odd: 1 });
    const fresh = await ProjectionRunner.replayInto(join(dir, 'fresh.db'), { log, projections: [rounds] });
    open.push(fresh);
    expect(await fresh.stateHash('rounds')).toBe(await again.stateHash('rounds'));
  });
});

describe('files', () => {
  it('a read model and an event log refuse to open each other', async () => {
    const rm = ReadModel.open(join(dir, 'rm-only.db'));
    await rm.close();
    await expect(openSqliteLog(join(dir, 'rm-only.db'))).rejects.toBeInstanceOf(NotACrucibleLogError);
    expect(() => ReadModel.open(join(dir, 'log.db'))).toThrow(NotAReadModelError);
  });
});

describe('a batch of many rows', () => {
  it('writes each put row once, many per statement, and reads back puts, merges and deletes within the batch', async () => {
    // 200 rounds in one commit: one batch puts 200 rows (three multi-row statements and a rest),
    // merges into some after their put, deletes others, and reads a put row back.
    const events = Array.from({ length: 200 }, (_, k) => makeEvent('RoundStarted', 'run-a', { round: k, problemIds: [`p${k}`] }));
    await log.append('s/0', events, { commitId: 'many' });
    const many: RowProjection = {
      name: 'many',
      version: 1,
      types: ['RoundStarted'],
      tables: { rounds: { columns: { round: 'integer', name: 'text', doubled: 'integer', flag: 'boolean', extra: 'json?' }, key: ['round', 'name'] } },
      apply: (e, view) => {
        if (!isEvent(e, 'RoundStarted')) return [];
        const r = e.data.round;
        const key = { round: r, name: e.data.problemIds[0]! };
        const writes = [put('rounds', { ...key, doubled: 2 * r, flag: r % 2 === 0, extra: r % 5 === 0 ? { at: [r] } : null })];
        if (r >= 10) {
          // Reads a row put earlier in the same batch, as stored (booleans and JSON decoded).
          const back = view.get('rounds', { round: r - 10, name: `p${r - 10}` });
          if (back && (r - 10) % 5 === 0 && JSON.stringify(back.extra) !== JSON.stringify({ at: [r - 10] }))
            throw new Error(`read back ${JSON.stringify(back)}`);
          if (back && r % 7 === 0) writes.push(merge('rounds', { ...key, doubled: (back.doubled as number) + 1 }));
        }
        if (r % 11 === 0) writes.push(del('rounds', { round: r - 1, name: `p${r - 1}` }));
        return writes;
      },
    };
    const r = await runner({ projections: [many] });
    await r.catchUp();
    const rows = r.readModel.db.prepare('SELECT round, name, doubled, flag, extra FROM rounds ORDER BY round').all() as {
      round: number;
      doubled: number;
      flag: number;
      extra: string | null;
    }[];
    const expected = [];
    for (let k = 0; k < 200; k++) {
      if ((k + 1) % 11 === 0) continue;
      // Merged when the row read back (k - 10) was not deleted by then.
      const merged = k >= 10 && k % 7 === 0 && (k - 9) % 11 !== 0;
      expected.push({
        round: k,
        name: `p${k}`,
        doubled: merged ? 2 * (k - 10) + 1 : 2 * k,
        flag: k % 2 === 0 ? 1 : 0,
        extra: k % 5 === 0 ? `{"at":[${k}]}` : null,
      });
    }
    expect(rows).toEqual(expected);
  });
});

describe('many deletes', () => {
  it('deletes rows written by an earlier batch, many per statement, under composite and text keys', async () => {
    // Rounds 0..149 put a row in each table; rounds 150..199 (the next batch) delete two each:
    // 100 deletes per table in one flush (a multi-row statement and a rest), rows 100..149 kept.
    const events = Array.from({ length: 200 }, (_, k) => makeEvent('RoundStarted', 'run-a', { round: k, problemIds: [`p${k}`] }));
    await log.append('s/0', events, { commitId: 'deletes' });
    const churn: RowProjection = {
      name: 'churn',
      version: 1,
      types: ['RoundStarted'],
      tables: {
        by_pair: { columns: { round: 'integer', name: 'text', size: 'integer' }, key: ['round', 'name'] },
        by_name: { columns: { name: 'text', size: 'integer' }, key: ['name'] },
      },
      apply: (e) => {
        if (!isEvent(e, 'RoundStarted')) return [];
        const r = e.data.round;
        if (r < 150) return [put('by_pair', { round: r, name: `p${r}`, size: r }), put('by_name', { name: `p${r}`, size: r })];
        return [0, 1].flatMap((j) => {
          const gone = 2 * (r - 150) + j;
          return [del('by_pair', { round: gone, name: `p${gone}` }), del('by_name', { name: `p${gone}` })];
        });
      },
    };
    const r = await runner({ projections: [churn], batchSize: 150 });
    await r.catchUp();
    const kept = Array.from({ length: 50 }, (_, i) => 100 + i);
    const pairs = r.readModel.db.prepare('SELECT round FROM by_pair ORDER BY round').all() as { round: number }[];
    const names = r.readModel.db.prepare('SELECT size FROM by_name ORDER BY size').all() as { size: number }[];
    expect(pairs.map((x) => x.round)).toEqual(kept);
    expect(names.map((x) => x.size)).toEqual(kept);
  });
});

describe('the log a read model was built from', () => {
  it('a read model built from one log is refused with another, naming the file and the fix; a copy of the log is the same log', async () => {
    await seed(30);
    const r = await runner();
    await r.catchUp();
    await r.close();
    open.splice(0);
    // Another log holding other events at positions the read model has already passed.
    const other = await openSqliteLog(join(dir, 'other.db'));
    try {
      await other.append('s/0', [makeEvent('RoundStarted', 'run-a', { round: 1, problemIds: [] })], { commitId: 'other-1' });
      const refused = runner({ log: other });
      await expect(refused).rejects.toBeInstanceOf(ReadModelOfAnotherLogError);
      await expect(refused).rejects.toThrow(
        `${join(dir, 'rm.db')} holds read models built from another log (${log.identity}), not from ${other.location} (${other.identity})`,
      );
      await expect(refused).rejects.toThrow(`Delete ${join(dir, 'rm.db')} to rebuild them from this log`);
      // Read-only, it still shows what it holds, and refuses to catch up.
      const shown = await runner({ log: other, readOnly: true });
      expect(await counts(shown)).toEqual(await expectedCounts());
      await expect(shown.catchUp()).rejects.toThrow(/opened read-only: catching up is refused/);
    } finally {
      await other.close();
    }
    // The log file copied elsewhere (closed, so whole) is the same log: the read model goes on
    // from its checkpoint.
    const identity = log.identity;
    const head = await log.head();
    await log.close();
    copyFileSync(join(dir, 'log.db'), join(dir, 'copy.db'));
    log = await openSqliteLog(join(dir, 'log.db'));
    const copy = await openSqliteLog(join(dir, 'copy.db'));
    try {
      expect(copy.identity).toBe(identity);
      const again = await runner({ log: copy });
      expect(again.checkpoint('event-counts')).toBe(head);
    } finally {
      await copy.close();
    }
  });

  it('a log file made again in the same place is another log', async () => {
    const before = log.identity;
    await log.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(dir, `log.db${suffix}`), { force: true });
    log = await openSqliteLog(join(dir, 'log.db'));
    expect(log.identity).not.toBe(before);
    expect(log.identity).toMatch(/^sqlite:[0-9a-f-]{36}$/);
  });

  it('a read model whose checkpoints are all at the start takes the log it is opened with', async () => {
    const r = await runner();
    await r.close();
    open.splice(0);
    const other = await openSqliteLog(join(dir, 'other.db'));
    try {
      await other.append('s/0', [makeEvent('RoundStarted', 'run-a', { round: 1, problemIds: [] })], { commitId: 'other-1' });
      const taken = await runner({ log: other });
      await taken.catchUp();
      expect(await counts(taken)).toEqual({ 'run-a/RoundStarted': 1 });
    } finally {
      await other.close();
    }
  });
});

describe('a projection that reads fewer types once its rows say so', () => {
  /** Counts RoundStarted and RoundCompleted until its first RunFailed, then RunFailed only. */
  const narrowing: RowProjection = {
    name: 'narrowing',
    version: 1,
    types: ['RoundStarted', 'RoundCompleted', 'RunFailed'],
    tables: {
      seen: { columns: { type: 'text', n: 'integer' }, key: ['type'] },
      mode: { columns: { id: 'integer', narrow: 'boolean' }, key: ['id'] },
    },
    apply: (e) => [add('seen', { type: e.type }, { n: 1 }), ...(e.type === 'RunFailed' ? [put('mode', { id: 1, narrow: true })] : [])],
    readsNow: (view) => (view.get('mode', { id: 1 }) ? ['RunFailed'] : ['RoundStarted', 'RoundCompleted', 'RunFailed']),
  };
  const seen = (r: ProjectionRunner) =>
    Object.fromEntries((r.readModel.db.prepare('SELECT type, n FROM seen').raw().all() as [string, number][]).map(([t, n]) => [t, n]));

  it('a batch after the switch applies and reads only the types it still needs, and a reopened runner starts narrow', async () => {
    // Event k: RoundStarted if k % 3 == 0, RoundCompleted if 1, RunFailed if 2; the first RunFailed is event 2.
    await seed(60);
    const filters: (readonly string[] | undefined)[] = [];
    const watched = new Proxy(log, {
      get(target, prop, receiver) {
        if (prop === 'readPages' || prop === 'read')
          return (range: unknown, filter?: { types?: readonly string[] }) => {
            filters.push(filter?.types);
            return (target[prop] as (r: unknown, f: unknown) => unknown).call(target, range, filter);
          };
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const r = await runner({ log: watched, projections: [narrowing], batchSize: 5 });
    await r.catchUp();
    // The first batch (events 0-4) applied every type; after it, only RunFailed.
    expect(seen(r)).toEqual({ RoundStarted: 2, RoundCompleted: 2, RunFailed: 20 });
    expect(filters).toEqual([['RoundStarted', 'RoundCompleted', 'RunFailed'], ['RunFailed']]);
    await seed(6, 10, 60);
    filters.length = 0;
    await r.close();
    open.splice(open.indexOf(r), 1);
    const again = await runner({ log: watched, projections: [narrowing], batchSize: 5 });
    await again.catchUp();
    expect(filters).toEqual([['RunFailed']]);
    expect(seen(again)).toEqual({ RoundStarted: 2, RoundCompleted: 2, RunFailed: 22 });
    // A rebuild starts from the declared types again.
    filters.length = 0;
    await again.rebuild();
    expect(filters[0]).toEqual(['RoundStarted', 'RoundCompleted', 'RunFailed']);
    expect(seen(again)).toEqual({ RoundStarted: 2, RoundCompleted: 2, RunFailed: 22 });
  });
});
