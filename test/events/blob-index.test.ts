/** The packed-blob index (src/events/sqlite/blob-index.ts): members of packs found in memory until
 * they make a run, runs merged by tier; other connections, rolled-back appends and files of
 * format 3 see every blob. */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import { SqliteBlobStore } from '../../src/events/sqlite/blob-store.js';
import { LOG_FORMAT_VERSION, openLogFile } from '../../src/events/sqlite/sqlite-file.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-blob-index-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const open = (file: string) => openLogFile(file, { synchronous: 'normal', busyTimeoutMs: 2000, create: true });
const testText = (i: number) => JSON.stringify({ input: `${i * 7919}\n`, output: `${i % 97}\n`, style: 'stdio' });

function tables(db: Database.Database) {
  const runs = db.prepare('SELECT run, tier, entries FROM blob_runs ORDER BY run').all() as { run: number; tier: number; entries: number }[];
  const watermark = Number(db.prepare("SELECT value FROM crucible_meta WHERE key = 'blob-packs-indexed'").pluck().get());
  const packs = db.prepare('SELECT count(*) FROM blob_packs').pluck().get() as number;
  const indexed = db.prepare('SELECT count(*) FROM blob_run_members').pluck().get() as number;
  return { runs, watermark, packs, indexed, base: db.prepare('SELECT count(*) FROM blob_members').pluck().get() as number };
}

it('writes the packs above the watermark as a run every few packs, merges a full tier into the next, and finds every blob from a fresh connection', async () => {
  const file = path.join(dir, 'log.db');
  const db = open(file);
  const store = new SqliteBlobStore(db, { mergePacks: 3, fanout: 2 });
  // A second connection opened before anything is written: it finds what the first writes later.
  const other = new SqliteBlobStore(open(file));
  const hashes: string[] = [];
  for (let batch = 0; batch < 40; batch++) {
    for (let i = 0; i < 5; i++) hashes.push(await store.put(testText(batch * 5 + i)));
    store.flush();
    // Unmerged blobs are found by the other connection too.
    expect(await other.getText(hashes.at(-1)!)).toBe(testText(batch * 5 + 4));
  }
  const t = tables(db);
  expect(t.packs).toBe(40);
  // Runs of 3 packs merged 2 to a tier: 39 packs indexed as 13 runs' worth, tiers binary.
  expect(t.watermark).toBe(39);
  expect(t.indexed).toBe(39 * 5);
  expect(t.runs.map((r) => r.entries).reduce((a, b) => a + b, 0)).toBe(39 * 5);
  const perTier = new Map<number, number>();
  for (const r of t.runs) perTier.set(r.tier, (perTier.get(r.tier) ?? 0) + 1);
  for (const n of perTier.values()) expect(n).toBeLessThan(2);
  // 13 = 0b1101: one run each of tiers 0, 2 and 3.
  expect([...perTier.keys()].sort()).toEqual([0, 2, 3]);
  expect(t.base).toBe(0);
  db.close();

  const fresh = new SqliteBlobStore(open(file));
  for (const [i, h] of hashes.entries()) expect(await fresh.getText(h)).toBe(testText(i));
  for (const [i, h] of hashes.entries()) expect(await other.getText(h)).toBe(testText(i));
  expect(await fresh.has('0'.repeat(64))).toBe(false);
});

it('merges in the append path of the log, and a read-only log sees every blob', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file, { synchronous: 'normal' });
  const hashes: string[] = [];
  // 1,100 appends of one small blob each: past the default 1,024 packs of a run.
  for (let i = 0; i < 1100; i++) {
    hashes.push(await log.blobs.put(testText(i)));
    await log.append('s', [makeEvent('RunFailed', 'run-1', { reason: `r${i}` })], { commitId: `c${i}` });
  }
  await log.close();
  const db = new Database(file, { readonly: true });
  const t = tables(db);
  db.close();
  expect(t.runs).toHaveLength(1);
  expect(t.indexed).toBe(t.watermark);
  expect(t.watermark).toBeGreaterThanOrEqual(1024);
  const reader = await openSqliteLog(file, { readOnly: true });
  try {
    for (const [i, h] of hashes.entries()) expect(await reader.blobs.getText(h)).toBe(testText(i));
  } finally {
    await reader.close();
  }
});

it('keeps the blobs of an append that rolled back and writes them with the next one', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  await log.append('s', [makeEvent('RunFailed', 'run-1', { reason: 'first' })], { commitId: 'c0' });
  const h = await log.blobs.put(testText(1));
  await expect(log.append('s', [makeEvent('RunFailed', 'run-1', { reason: 'late' })], { commitId: 'c1', expectedPosition: 0 as never })).rejects.toThrow(
    /expected/i,
  );
  await log.append('s', [makeEvent('RunFailed', 'run-1', { reason: 'next' })], { commitId: 'c2' });
  await log.close();
  const again = await openSqliteLog(file, { readOnly: true });
  try {
    expect(await again.blobs.getText(h)).toBe(testText(1));
  } finally {
    await again.close();
  }
});

it('a log of format 3 keeps its members in blob_members: read before and after it is opened for writing, and its new blobs indexed in runs', async () => {
  const file = path.join(dir, 'log.db');
  cpSync(path.join(import.meta.dirname, '../fixtures/format5-run/log.db'), file);
  const before = new Database(file, { readonly: true });
  expect(before.prepare("SELECT value FROM crucible_meta WHERE key = 'format'").pluck().get()).toBe('3');
  const baseCount = before.prepare('SELECT count(*) FROM blob_members').pluck().get() as number;
  before.close();
  expect(baseCount).toBeGreaterThan(0);

  // A reader of the old file, opened before a writer upgrades it.
  const reader = await openSqliteLog(file, { readOnly: true });
  const old: string[] = [];
  for await (const h of reader.blobs.list()) old.push(h);
  for (const h of old) expect((await reader.blobs.get(h)).byteLength).toBeGreaterThan(0);

  const db = open(file);
  const store = new SqliteBlobStore(db, { mergePacks: 2, fanout: 2 });
  const added: string[] = [];
  for (let batch = 0; batch < 7; batch++) {
    for (let i = 0; i < 3; i++) added.push(await store.put(testText(1000 + batch * 3 + i)));
    store.flush();
  }
  const t = tables(db);
  expect(Number(db.prepare("SELECT value FROM crucible_meta WHERE key = 'format'").pluck().get())).toBe(LOG_FORMAT_VERSION);
  expect(t.base).toBe(baseCount);
  expect(t.indexed).toBeGreaterThan(0);
  db.close();

  for (const [i, h] of added.entries()) expect(await reader.blobs.getText(h)).toBe(testText(1000 + i));
  await reader.close();
  const fresh = await openSqliteLog(file, { readOnly: true });
  try {
    for (const h of old) expect((await fresh.blobs.get(h)).byteLength).toBeGreaterThan(0);
    for (const [i, h] of added.entries()) expect(await fresh.blobs.getText(h)).toBe(testText(1000 + i));
  } finally {
    await fresh.close();
  }
});

it('a watermark that is not a pack number is refused by name', async () => {
  const file = path.join(dir, 'log.db');
  await (await openSqliteLog(file)).close();
  const db = new Database(file);
  db.prepare("UPDATE crucible_meta SET value = 'seven' WHERE key = 'blob-packs-indexed'").run();
  db.close();
  await expect(openSqliteLog(file)).rejects.toThrow(/"blob-packs-indexed" holds "seven", not a pack number/);
});

it('merges in slices over many appends: every blob is found at every point, by the writer, another connection and a fresh one; a later process goes on with the merge', async () => {
  const file = path.join(dir, 'log.db');
  const db = open(file);
  // Runs of 2 packs, merged 2 to a tier, 3 entries moved per pack written: a merge spans appends.
  const options = { mergePacks: 2, fanout: 2, slicePerPack: 3 };
  let store = new SqliteBlobStore(db, options);
  const other = new SqliteBlobStore(open(file));
  const hashes: string[] = [];
  let sawMerge = 0;
  let sawHigher = 0;
  for (let batch = 0; batch < 30; batch++) {
    for (let i = 0; i < 4; i++) hashes.push(await store.put(testText(batch * 4 + i)));
    store.flush();
    const merges = db.prepare("SELECT value FROM crucible_meta WHERE key = 'blob-merge'").pluck().get() as string | undefined;
    for (const { run, tier, sources } of merges === undefined ? [] : (JSON.parse(merges) as { run: number; tier: number; sources: number[] }[])) {
      sawMerge++;
      if (tier > 0) sawHigher++;
      // The merged run fills in tier -1, beside its sources of the tier it merges.
      const t = tables(db);
      expect(t.runs.find((r) => r.run === run)?.tier).toBe(-1);
      for (const s of sources) expect(t.runs.find((r) => r.run === s)?.tier).toBe(tier);
    }
    // Every entry in exactly one run: the runs' counts add up to the rows, and to the packs indexed.
    const t = tables(db);
    expect(t.runs.reduce((n, r) => n + r.entries, 0)).toBe(t.indexed);
    expect(t.indexed).toBe(t.watermark * 4);
    for (const [i, h] of hashes.entries()) expect(await other.getText(h), `blob ${i} after batch ${batch}`).toBe(testText(i));
    if (batch === 20) {
      // A new process (a new store on the same connection) goes on with a merge in progress.
      store = new SqliteBlobStore(db, options);
    }
  }
  expect(sawMerge).toBeGreaterThan(5);
  expect(sawHigher).toBeGreaterThan(0);
  db.close();
  const fresh = new SqliteBlobStore(open(file));
  for (const [i, h] of hashes.entries()) expect(await fresh.getText(h)).toBe(testText(i));
});

it('a merge in progress whose runs were changed by another hand is dropped, and its entries stay found', async () => {
  const file = path.join(dir, 'log.db');
  const db = open(file);
  const store = new SqliteBlobStore(db, { mergePacks: 2, fanout: 2, slicePerPack: 1 });
  const hashes: string[] = [];
  let batch = 0;
  while (db.prepare("SELECT value FROM crucible_meta WHERE key = 'blob-merge'").pluck().get() === undefined) {
    for (let i = 0; i < 4; i++) hashes.push(await store.put(testText(batch * 4 + i)));
    store.flush();
    batch++;
  }
  // One more slice, then a source's run row removed by hand (its members folded into the merged
  // run, as an older writer merging that tier would leave them).
  for (let i = 0; i < 4; i++) hashes.push(await store.put(testText(batch * 4 + i)));
  store.flush();
  const merges = JSON.parse(db.prepare("SELECT value FROM crucible_meta WHERE key = 'blob-merge'").pluck().get() as string) as {
    run: number;
    sources: number[];
  }[];
  expect(merges).toHaveLength(1);
  const { run, sources } = merges[0]!;
  db.prepare('UPDATE blob_run_members SET run = ? WHERE run = ?').run(run, sources[0]);
  db.prepare('DELETE FROM blob_runs WHERE run = ?').run(sources[0]);
  for (let more = 0; more < 6; more++) {
    for (let i = 0; i < 4; i++) hashes.push(await store.put(testText(10_000 + more * 4 + i)));
    store.flush();
  }
  const t = tables(db);
  expect(t.runs.some((r) => r.run === run && r.tier === 0) || !t.runs.some((r) => r.run === run)).toBe(true);
  expect(t.runs.every((r) => r.tier >= 0) || db.prepare("SELECT value FROM crucible_meta WHERE key = 'blob-merge'").pluck().get() !== undefined).toBe(true);
  db.close();
  const fresh = new SqliteBlobStore(open(file));
  for (const h of hashes) expect(await fresh.has(h)).toBe(true);
});

it('a merge row that is not a list of merges in progress is refused by name', async () => {
  const file = path.join(dir, 'log.db');
  const db = open(file);
  const store = new SqliteBlobStore(db, { mergePacks: 1, fanout: 2 });
  db.prepare('INSERT INTO crucible_meta (key, value) VALUES (\'blob-merge\', \'{"run": "x"}\')').run();
  await store.put(testText(1));
  expect(() => store.flush()).toThrow(/"blob-merge" holds .*, not a list of merges in progress/);
  // A list whose merge names no tier: it could not be finished, and is refused too.
  db.prepare(`UPDATE crucible_meta SET value = '[{"run": 3, "sources": [1, 2], "after": null}]' WHERE key = 'blob-merge'`).run();
  await store.put(testText(2));
  expect(() => store.flush()).toThrow(/"blob-merge" holds .*, not a list of merges in progress/);
  db.close();
});
