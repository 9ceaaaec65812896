/**
 * Published checkpoints in the log's blob store, against real gpu-bridge processes (toy model,
 * CPU) and a real SQLite log file: a version trained and published by one bridge is put back
 * together from the blob store alone (its directory deleted) and loaded by another bridge, with
 * the same weight files and the same greedy sample; a missing or corrupt blob is refused naming
 * the version and the file.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BridgeClient, CheckpointBlobError, localCheckpoint, type CheckpointRef } from '../../src/bridge/index.js';
import { BridgeTrainerOptions } from '../../src/config/openai.js';
import { openJetStreamLog } from '../../src/events/jetstream/jetstream-log.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { BridgeParams, BridgeTrainer } from '../../src/policies/bridge-trainer.js';
import type { TrainStepRequest } from '../../src/policies/port.js';
import { startBridgeServe, torchMissing } from '../support/bridge-serve.js';
import { startTestNats, uniqueLogNames, type TestNats } from '../support/nats.js';
import { syncWeights } from '../../src/policies/weight-sync.js';

/** A blob's key in the log file: the 32 bytes of its sha256 (log format 2). */
const blobKey = (sha256: string) => Buffer.from(sha256, 'hex');

const missing = torchMissing();
const TINY = { d_model: 32, n_layers: 2, n_heads: 2, d_ff: 64, max_seq_len: 256 };
const options = BridgeTrainerOptions.parse({ backend: 'toy', config: TINY, seed: 5, device: 'cpu', retry: { attempts: 2, baseDelayMs: 10 } });
/** The toy model at its default size (d_model 128, what `serve --backend toy` holds; larger than
 * the neural demo's): a 2.25 MB model.pt and 4.5 MB optimizer.pt per version. */
const defaultSized = BridgeTrainerOptions.parse({ backend: 'toy', seed: 5, device: 'cpu', retry: { attempts: 2, baseDelayMs: 10 } });
const fresh = JSON.stringify({ backend: 'bridge', version: 0, checkpoint: null });
const PROMPT = 'Solve problem 1:\nreturn the sum of a and b.\n';

let root: string;
const started: BridgeClient[] = [];

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-checkpoint-blobs-'));
});
afterAll(async () => {
  await Promise.all(started.map((c) => c.shutdown(2000)));
  rmSync(root, { recursive: true, force: true });
});

function sft(): TrainStepRequest {
  const samples = Array.from({ length: 4 }, (_, i) => ({
    prompt: PROMPT,
    response: `def add(a, b):\n    return a + b${' '.repeat(i)}\n`,
    advantage: 1,
    contextKey: null,
    choiceKey: null,
  }));
  return { batchId: 'run/sft/0/code', role: 'code', expectedVersion: 0, algorithm: 'sft', samples, hyper: { lr: 0.01 } };
}

async function bridge(): Promise<BridgeClient> {
  const { client } = await BridgeClient.start({ timeoutMs: 120_000 });
  started.push(client);
  return client;
}

async function greedy(client: BridgeClient): Promise<number[]> {
  const g = await client.generate({ policy: 'code', prompts: [PROMPT], n: 1, max_tokens: 24, temperature: 0, seed: 1 });
  return g.outputs[0]![0]!.token_ids;
}

describe.skipIf(missing !== null)(`checkpoints in the blob store${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  it('a published version is loaded on a disk that lacks its directory, from the blob store alone; a corrupt or missing blob is refused naming the file', async () => {
    const logFile = path.join(root, 'run.sqlite');
    const ckRoot = path.join(root, 'trainer-disk', 'checkpoints', 'code');

    // The trainer's process: one SFT step, published, its files put into the log's blob store.
    const first = await bridge();
    let log = await openSqliteLog(logFile);
    const trainer = new BridgeTrainer(
      { client: async () => first, role: 'code', options, root: ckRoot, batchDir: path.join(root, 'batches'), reload: null, blobs: log.blobs },
      fresh,
    );
    expect((await trainer.trainStep(sft())).version).toBe(1);
    const snap = await trainer.snapshot();
    const params = BridgeParams.parse(JSON.parse(snap.params));
    const cp = params.checkpoint!;
    expect(params.version).toBe(1);
    const files = Object.entries(cp.files ?? {});
    expect(files.length).toBeGreaterThan(0);
    for (const [name, f] of files) expect(f.bytes).toBe(readFileSync(path.join(cp.path, name)).byteLength);
    const paramsHash = await log.blobs.put(snap.params);
    const before = await greedy(first);
    await log.close();

    // Another machine: nothing but the log file. The trainer's directory is gone.
    rmSync(path.join(root, 'trainer-disk'), { recursive: true, force: true });
    log = await openSqliteLog(logFile);
    const stored = await log.blobs.getText(paramsHash);
    for (const [, f] of files) expect(await log.blobs.has(f.sha256)).toBe(true);
    const second = await bridge();
    const cache = path.join(root, 'other-disk', 'checkpoint-cache');
    const restarted = new BridgeTrainer(
      {
        client: async () => second,
        role: 'code',
        options,
        root: path.join(root, 'other-disk', 'checkpoints', 'code'),
        batchDir: path.join(root, 'batches2'),
        reload: null,
        blobs: log.blobs,
        cacheDir: cache,
      },
      stored,
    );
    // A snapshot of a published version loads it into the bridge (and publishes nothing new).
    expect((await restarted.snapshot()).params).toBe(stored);
    expect((await second.status()).policies.code).toMatchObject({ version: 1 });
    const copy = path.join(cache, cp.sha256);
    expect(existsSync(cp.path)).toBe(false);
    for (const [name, f] of files) expect(readFileSync(path.join(copy, name)).byteLength).toBe(f.bytes);
    // The same weights: the same greedy sample, and a re-publish gives the same weight files.
    expect(await greedy(second)).toEqual(before);
    const again = await second.publish({ policy: 'code', root: path.join(root, 'republished'), version: 1 });
    const manifest = JSON.parse(readFileSync(path.join(again.path, 'MANIFEST.json'), 'utf8')) as { files: Record<string, { sha256: string }> };
    expect(manifest.files['model.pt']?.sha256).toBe(cp.files!['model.pt']!.sha256);
    for (const [name, f] of files) if (name in manifest.files) expect(manifest.files[name]!.sha256).toBe(f.sha256);
    await log.close();

    // A flipped byte in one file's blob: refused, naming the version and the file.
    const [victim, victimFile] = [...files].sort((a, b) => b[1].bytes - a[1].bytes)[0]!;
    const db = new Database(logFile);
    const bytes = Buffer.from(db.prepare('SELECT bytes FROM blobs WHERE hash = ?').pluck().get(blobKey(victimFile.sha256)) as Buffer);
    const mid = bytes.length >> 1;
    bytes[mid] = bytes[mid]! ^ 0xff;
    db.prepare('UPDATE blobs SET bytes = ? WHERE hash = ?').run(bytes, blobKey(victimFile.sha256));
    db.close();
    log = await openSqliteLog(logFile);
    const ref: CheckpointRef = cp;
    const corrupt = localCheckpoint(ref, log.blobs, path.join(root, 'third-disk'), 'code version 1');
    await expect(corrupt).rejects.toBeInstanceOf(CheckpointBlobError);
    await expect(localCheckpoint(ref, log.blobs, path.join(root, 'third-disk'), 'code version 1')).rejects.toThrow(
      new RegExp(`checkpoint code version 1, file ${victim.replace('.', '\\.')}: blob ${victimFile.sha256} is corrupt`),
    );
    // Nothing half-written is left to pass as the checkpoint.
    expect(existsSync(path.join(root, 'third-disk', cp.sha256))).toBe(false);
    // A restarted trainer meets the same error (not a bridge failure to retry).
    const third = new BridgeTrainer(
      {
        client: async () => second,
        role: 'code',
        options,
        root: path.join(root, 'third-disk', 'ck'),
        batchDir: path.join(root, 'batches3'),
        reload: null,
        blobs: log.blobs,
        cacheDir: path.join(root, 'third-disk'),
      },
      JSON.stringify({ ...params, version: 1 }),
    );
    await second.loadPolicy({ policy: 'code', backend: 'toy', config: TINY, seed: 9, version: 0 });
    await expect(third.snapshot()).rejects.toThrow(/checkpoint code version 1, file .*corrupt/);
    await log.close();

    // The blob gone altogether.
    const db2 = new Database(logFile);
    expect(db2.prepare('DELETE FROM blobs WHERE hash = ?').run(blobKey(victimFile.sha256)).changes).toBe(1);
    db2.close();
    log = await openSqliteLog(logFile);
    await expect(localCheckpoint(ref, log.blobs, path.join(root, 'fourth-disk'), 'code version 1')).rejects.toThrow(
      `checkpoint code version 1, file ${victim}: blob ${victimFile.sha256} is not in the blob store`,
    );
    // Without a blob store and without the directory: says so.
    await expect(localCheckpoint(ref, null, path.join(root, 'fifth-disk'), 'code version 1')).rejects.toThrow(/is missing or differs, and no blob store/);
    await log.close();
  }, 300_000);

  it('on JetStream: blobs of a few MB come back whole through chunks, and a checkpoint of the default-sized toy model (6.8 MB) is loaded from the stream alone', async () => {
    let nats: TestNats | null = null;
    try {
      nats = await startTestNats(1);
      const names = uniqueLogNames();
      let log = await openJetStreamLog({ servers: nats.urls, ...names });
      const big = new Uint8Array(5 * 1024 * 1024 + 17).map((_, i) => (i * 7919) % 253);
      const h = await log.blobs.put(big);
      expect(Buffer.compare(Buffer.from(await log.blobs.get(h)), Buffer.from(big))).toBe(0);

      // The toy model at its default size: its files span many 256 KiB chunks.
      const first = await bridge();
      const trainerDisk = path.join(root, 'js-trainer-disk');
      const trainer = new BridgeTrainer(
        {
          client: async () => first,
          role: 'code',
          options: defaultSized,
          root: trainerDisk,
          batchDir: path.join(root, 'js-batches'),
          reload: null,
          blobs: log.blobs,
        },
        fresh,
      );
      await trainer.trainStep(sft());
      const snap = await trainer.snapshot();
      const cp = BridgeParams.parse(JSON.parse(snap.params)).checkpoint!;
      expect(Math.max(...Object.values(cp.files!).map((f) => f.bytes))).toBeGreaterThan(256 * 1024);
      const before = await greedy(first);
      await log.close();
      rmSync(trainerDisk, { recursive: true, force: true });

      log = await openJetStreamLog({ servers: nats.urls, ...names, create: false });
      const second = await bridge();
      const restarted = new BridgeTrainer(
        {
          client: async () => second,
          role: 'code',
          options: defaultSized,
          root: path.join(root, 'js-other', 'ck'),
          batchDir: path.join(root, 'js-batches2'),
          reload: null,
          blobs: log.blobs,
          cacheDir: path.join(root, 'js-other', 'cache'),
        },
        snap.params,
      );
      await restarted.snapshot();
      expect(await greedy(second)).toEqual(before);
      await log.close();
    } finally {
      await nats?.stop();
    }
  }, 300_000);

  it("a sampler's server loads the copy put together from the blob store and serves that version", async () => {
    const logFile = path.join(root, 'serve.sqlite');
    const log = await openSqliteLog(logFile);
    const first = await bridge();
    const trainerDisk = path.join(root, 'serve-trainer-disk');
    const trainer = new BridgeTrainer(
      {
        client: async () => first,
        role: 'code',
        options: defaultSized,
        root: trainerDisk,
        batchDir: path.join(root, 'serve-batches'),
        reload: null,
        blobs: log.blobs,
      },
      fresh,
    );
    await trainer.trainStep(sft());
    const cp = BridgeParams.parse(JSON.parse((await trainer.snapshot()).params)).checkpoint!;
    rmSync(trainerDisk, { recursive: true, force: true });
    // Two readers of one cache at once (two samplers): one copy, both get it whole.
    const [local, other] = await Promise.all([1, 2].map(() => localCheckpoint(cp, log.blobs, path.join(root, 'serve-cache'), 'code version 1')));
    expect(local).toBe(path.join(root, 'serve-cache', cp.sha256));
    expect(other).toBe(local);
    expect(readdirSync(path.join(root, 'serve-cache'))).toEqual([cp.sha256]);
    const serve = await startBridgeServe({ adminToken: 'checkpoint-test-admin-token' });
    try {
      const rec = await syncWeights(
        { kind: 'bridge', serverUrl: serve.baseUrl.replace(/\/v1\/?$/, ''), token: 'checkpoint-test-admin-token', baseModel: 'toy', prefix: 'toy' },
        { path: local!, sha256: cp.sha256 },
        1,
      );
      expect(rec.status).toBe(200);
      const models = (await (await fetch(`${serve.baseUrl.replace(/\/+$/, '')}/models`)).json()) as { data: { version: number; sha256: string }[] };
      expect(models.data[0]).toMatchObject({ version: 1, sha256: cp.sha256 });
    } finally {
      await serve.close();
      await log.close();
    }
  }, 300_000);
});
