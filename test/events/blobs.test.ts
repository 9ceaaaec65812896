/** The BlobStore port's own backends (directory, memory) and moving a run between logs. */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DirectoryBlobStore, MemoryBlobStore, blobHashesIn, copyBlobs, runBlobHashes, sha256Hex, type BlobStore } from '../../src/events/blobs.js';
import { makeEvent } from '../../src/events/catalog.js';
import { BlobCorruptError, BlobNotFoundError, BlobNotTextError } from '../../src/events/errors.js';
import { openMemoryLog } from '../../src/events/memory/memory-log.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { copyRun, runIdOfLog } from '../../src/events/transfer.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-blobs-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function listOf(store: BlobStore): Promise<string[]> {
  const out: string[] = [];
  for await (const h of store.list()) out.push(h);
  return out.sort();
}

describe.each([
  ['directory', () => new DirectoryBlobStore(path.join(dir, 'blobs'))],
  ['memory', () => new MemoryBlobStore()],
])('blob store: %s', (_name, make) => {
  it('puts, gets, lists by sha256; same content, same hash; absent and non-text are named', async () => {
    const store = make();
    const h = await store.put('print(1)\n');
    expect(h).toBe(sha256Hex('print(1)\n'));
    expect(await store.put(Buffer.from('print(1)\n'))).toBe(h);
    expect(await store.getText(h)).toBe('print(1)\n');
    const bin = await store.put(new Uint8Array([0xff, 0xfe]));
    await expect(store.getText(bin)).rejects.toBeInstanceOf(BlobNotTextError);
    await expect(store.get(sha256Hex('nope'))).rejects.toBeInstanceOf(BlobNotFoundError);
    expect(await listOf(store)).toEqual([h, bin].sort());
  });
});

describe('directory blob store', () => {
  it('leaves no temporary files and detects a corrupted file', async () => {
    const store = new DirectoryBlobStore(path.join(dir, 'blobs'));
    const h = await store.put('def f(): pass\n');
    const sub = path.join(dir, 'blobs', h.slice(0, 2));
    expect(readdirSync(sub)).toEqual([h]);
    writeFileSync(path.join(sub, h), 'def f(): fail\n');
    await expect(store.get(h)).rejects.toBeInstanceOf(BlobCorruptError);
  });
});

describe('moving a run between logs', () => {
  it('copies the blobs its events name and its commits in order; a second copy changes nothing', async () => {
    const from = openMemoryLog();
    const program = await from.blobs.put('def solve(): return 42\n');
    await from.blobs.put('a blob no event names');
    await from.append(
      'conductor',
      [
        makeEvent('RunStarted', 'run-x', {
          method: 'code-a1',
          config: {},
          configHash: sha256Hex('c'),
          seed: 1,
          crucibleVersion: '0',
          problems: [{ problemId: 'p1', problemHash: program }],
        } as never),
      ],
      { commitId: 'run-x/started' },
    );
    await from.append('conductor', [makeEvent('RoundStarted', 'run-x', { round: 0, problemIds: ['p1'] }), makeEvent('RoundCompleted', 'run-x', { round: 0 })], {
      commitId: 'run-x/r0',
    });
    await from.append('other', [makeEvent('RunFailed', 'run-y', { reason: 'another run' })], { commitId: 'run-y/f' });
    expect(blobHashesIn({ a: [program, 'x'], b: { c: program } })).toEqual(new Set([program]));
    expect(await runBlobHashes(from.read({}, { runId: 'run-x' }), from.blobs)).toEqual([program]);

    const to = await openSqliteLog(path.join(dir, 'log.db'));
    expect(await runIdOfLog(from)).toBe('run-x');
    expect(await copyRun(from, to, 'run-x')).toEqual({ runId: 'run-x', commits: 2, duplicates: 0, events: 3, blobs: 1 });
    expect(await to.blobs.getText(program)).toBe('def solve(): return 42\n');
    const copied = [];
    for await (const e of to.read()) copied.push([e.commitId, e.type, e.id]);
    const original = [];
    for await (const e of from.read({}, { runId: 'run-x' })) original.push([e.commitId, e.type, e.id]);
    expect(copied).toEqual(original);
    expect(await copyRun(from, to, 'run-x')).toEqual({ runId: 'run-x', commits: 2, duplicates: 2, events: 3, blobs: 0 });
    await to.close();
  });

  it("copies the blobs a policy version's parameters name (a checkpoint's files), not only those its events name", async () => {
    const from = openMemoryLog();
    const model = await from.blobs.put(new Uint8Array([1, 2, 3, 4]));
    const optimizer = await from.blobs.put(new Uint8Array([5, 6, 7]));
    const manifest = await from.blobs.put('{"files":{}}');
    const params = await from.blobs.put(
      JSON.stringify({
        backend: 'bridge',
        version: 1,
        checkpoint: {
          path: '/elsewhere/code/v1',
          sha256: manifest,
          files: { 'model.pt': { sha256: model, size: 4 }, 'optimizer.pt': { sha256: optimizer, size: 3 } },
        },
      }),
    );
    const notJson = await from.blobs.put('version 1 of a catalog policy');
    await from.append(
      'learner',
      [
        makeEvent('PolicyVersionPublished', 'run-x', {
          round: 0,
          policy: { role: 'code', name: 'bridge', version: 1 },
          checkpoint: params,
          paramsHash: params,
        }),
        makeEvent('PolicyVersionPublished', 'run-x', {
          round: 0,
          policy: { role: 'test', name: 'catalog', version: 1 },
          checkpoint: notJson,
          paramsHash: notJson,
        }),
      ],
      { commitId: 'run-x/v1' },
    );
    expect(await runBlobHashes(from.read({}, { runId: 'run-x' }), from.blobs)).toEqual([model, optimizer, manifest, params, notJson].sort());
    const to = openMemoryLog();
    expect((await copyRun(from, to, 'run-x')).blobs).toBe(5);
    expect([...(await to.blobs.get(model))]).toEqual([1, 2, 3, 4]);
  });

  it("copies the files of a warm start's recorded checkpoints, from which a copied run resumes its warm start", async () => {
    const from = openMemoryLog();
    const model = await from.blobs.put(new Uint8Array([9, 9]));
    const manifest = await from.blobs.put('{"files":{"model.pt":{}}}');
    const params = await from.blobs.put(
      JSON.stringify({
        backend: 'bridge',
        version: 3,
        checkpoint: { path: '/elsewhere/code/v3', sha256: manifest, files: { 'model.pt': { sha256: model, size: 2 } } },
      }),
    );
    const key = await from.blobs.put('{"steps":10}');
    await from.append(
      'learner',
      [
        makeEvent('WarmStartCheckpointed', 'run-x', {
          role: 'code',
          step: 3,
          steps: 10,
          policy: { role: 'code', name: 'bridge:code', version: 3 },
          checkpoint: params,
          key,
          cached: false,
        }),
      ],
      { commitId: 'run-x/sft' },
    );
    expect(await runBlobHashes(from.read({}, { runId: 'run-x' }), from.blobs)).toEqual([model, manifest, params, key].sort());
  });
});
