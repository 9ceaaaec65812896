/** The log file's blob table: kept WITHOUT ROWID in new files; files made with the rowid table still read and write. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { LOG_FORMAT_VERSION } from '../../src/events/sqlite/sqlite-file.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-blobs-table-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Text too long for a pack (over 16 KB): stored as a row of `blobs` under its full key. */
const big = (tag: string) =>
  `# ${tag}\n` + Array.from({ length: 1200 }, (_, i) => createHash('sha256').update(`${tag}${i}`).digest('hex').slice(0, 16)).join('\n');

const tableSql = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("SELECT sql FROM sqlite_master WHERE name = 'blobs'").pluck().get() as string;
  } finally {
    db.close();
  }
};

it('a new log keeps blobs without a rowid; a log with the older rowid table still reads and writes them', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  const first = await log.blobs.put(big('1'));
  await log.close();
  expect(tableSql(file)).toMatch(/WITHOUT ROWID/);

  // The older table: same columns, a rowid and a second index on the hash.
  const db = new Database(file);
  db.exec(
    'CREATE TABLE old_blobs (hash TEXT PRIMARY KEY, bytes BLOB NOT NULL); INSERT INTO old_blobs SELECT hash, bytes FROM blobs; DROP TABLE blobs; ALTER TABLE old_blobs RENAME TO blobs;',
  );
  db.close();
  expect(tableSql(file)).not.toMatch(/WITHOUT ROWID/);

  const again = await openSqliteLog(file);
  try {
    expect(await again.blobs.getText(first)).toBe(big('1'));
    const second = await again.blobs.put(big('2'));
    expect(await again.blobs.getText(second)).toBe(big('2'));
  } finally {
    await again.close();
  }
  expect(tableSql(file)).not.toMatch(/WITHOUT ROWID/);
  const db2 = new Database(file, { readonly: true });
  expect(db2.prepare('SELECT count(*) FROM blobs').pluck().get()).toBe(2);
  db2.close();
});

it('keys blobs by the 32 bytes of their hash; a format-1 file with hex keys still reads, lists and appends, and is marked as the current format', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  const first = await log.blobs.put(big('1'));
  await log.close();

  const db = new Database(file);
  const key = db.prepare('SELECT hash FROM blobs').pluck().get() as Buffer;
  expect(Buffer.isBuffer(key) && key.toString('hex')).toBe(first);
  // As a format-1 writer left it: the hex text as key, the bytes alone (no tag byte).
  db.prepare('UPDATE blobs SET hash = ?, bytes = ?').run(first, Buffer.from(big('1')));
  db.prepare("UPDATE crucible_meta SET value = '1' WHERE key = 'format'").run();
  db.close();

  const again = await openSqliteLog(file);
  try {
    expect(await again.blobs.getText(first)).toBe(big('1'));
    expect(await again.blobs.has(first)).toBe(true);
    const second = await again.blobs.put('print(2)\n');
    // Put again in the new form: listed once.
    await again.blobs.put(big('1'));
    await again.append('s', [], { commitId: 'c0' }).catch(() => undefined);
    expect(await again.blobs.getText(second)).toBe('print(2)\n');
    const listed: string[] = [];
    for await (const h of again.blobs.list()) listed.push(h);
    expect(listed.sort()).toEqual([first, second].sort());
  } finally {
    await again.close();
  }
  const after = new Database(file, { readonly: true });
  expect(after.prepare("SELECT value FROM crucible_meta WHERE key = 'format'").pluck().get()).toBe(String(LOG_FORMAT_VERSION));
  after.close();
});

it('a blob whose stored bytes changed is refused, whichever form its key has', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  const h = await log.blobs.put(big('3'));
  await log.close();
  const db = new Database(file);
  // Tagged as stored raw, with other bytes.
  db.prepare('UPDATE blobs SET bytes = ?').run(Buffer.concat([Buffer.of(0), Buffer.from(big('4'))]));
  db.close();
  const again = await openSqliteLog(file);
  try {
    await expect(again.blobs.get(h)).rejects.toThrow(/corrupt|match/i);
  } finally {
    await again.close();
  }
});

it('stores a long text blob deflated and gives back its exact bytes; an incompressible one as it is; a short one in a pack even alone', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  const text = Array.from({ length: 600 }, (_, i) => JSON.stringify({ style: 'stdio', input: `${i * 7919}\n`, output: `${i}\n` })).join('\n');
  const noise = Buffer.concat(Array.from({ length: 640 }, (_, i) => createHash('sha256').update(String(i)).digest()));
  const [long, short, random] = [await log.blobs.put(text), await log.blobs.put('x = 1\n'), await log.blobs.put(noise)];
  await log.close();
  const db = new Database(file, { readonly: true });
  const size = (h: string) => db.prepare('SELECT length(bytes) FROM blobs WHERE hash = ?').pluck().get(Buffer.from(h, 'hex')) as number | undefined;
  expect(size(long)).toBeLessThan(Buffer.byteLength(text) / 2);
  expect(size(short)).toBeUndefined();
  expect(size(random)).toBe(noise.byteLength + 1);
  expect(db.prepare('SELECT count(*) FROM blob_packs').pluck().get()).toBe(1);
  db.close();
  const again = await openSqliteLog(file);
  try {
    expect(await again.blobs.getText(long)).toBe(text);
    expect(await again.blobs.getText(short)).toBe('x = 1\n');
    expect(Buffer.from(await again.blobs.get(random)).equals(noise)).toBe(true);
  } finally {
    await again.close();
  }
});

it('keeps small blobs put together in packs; two blobs sharing the first 52 bits of their hash are both found; a damaged pack is reported', async () => {
  const file = path.join(dir, 'log.db');
  const log = await openSqliteLog(file);
  const tests = Array.from({ length: 150 }, (_, i) => JSON.stringify({ input: `${i * 7919}\n`, output: `${i}\n`, style: 'stdio' }));
  const hashes = [];
  for (const t of tests) hashes.push(await log.blobs.put(t));
  await log.close();

  const db = new Database(file);
  expect(db.prepare('SELECT count(*) FROM blob_packs').pluck().get()).toBe(3);
  expect(db.prepare('SELECT count(*) FROM blobs').pluck().get()).toBe(0);
  // Another blob whose first 52 bits are those of a member (as if two hashes shared them), in
  // the table a file of format 3 finds its members through.
  const other = 'print("other")\n';
  const otherHash = createHash('sha256').update(other).digest('hex');
  db.prepare('INSERT INTO blob_members (prefix, place) VALUES (?, ?)').run(parseInt(otherHash.slice(0, 13), 16), 64 + 5);
  db.close();

  const again = await openSqliteLog(file);
  try {
    expect(await again.blobs.has(otherHash)).toBe(false);
    await expect(again.blobs.get(otherHash)).rejects.toThrow(/is not in the blob store/);
    expect(await again.blobs.put(other)).toBe(otherHash);
    await again.blobs.put('x = 2\n');
  } finally {
    await again.close();
  }
  const reread = await openSqliteLog(file);
  try {
    expect(await reread.blobs.getText(otherHash)).toBe(other);
    for (const [i, h] of hashes.entries()) expect(await reread.blobs.getText(h)).toBe(tests[i]);
    const listed: string[] = [];
    for await (const h of reread.blobs.list()) listed.push(h);
    expect(listed.sort()).toEqual([...hashes, otherHash, createHash('sha256').update('x = 2\n').digest('hex')].sort());
  } finally {
    await reread.close();
  }

  const damaged = new Database(file);
  damaged.prepare('UPDATE blob_packs SET bytes = substr(bytes, 1, 20) WHERE id = 1').run();
  damaged.close();
  const broken = await openSqliteLog(file);
  try {
    await expect(broken.blobs.get(hashes[0]!)).rejects.toThrow(/corrupt/i);
    expect(await broken.blobs.getText(hashes[100]!)).toBe(tests[100]);
  } finally {
    await broken.close();
  }
});
