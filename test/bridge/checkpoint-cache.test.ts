/**
 * The cache of trained checkpoints shared by the runs of one folder: an entry is found only
 * whole, is kept once put (a second put of the same key keeps it), a torn one counts as absent
 * and is replaced, and a key that is not a sha256 never reaches the file system.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CheckpointCache } from '../../src/bridge/checkpoint-cache.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-checkpoint-cache-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** A checkpoint directory as gpu-bridge publishes one: files, MANIFEST.json, STABLE. */
function checkpointDir(name: string, weights: string, version: number): { dir: string; sha256: string } {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  const files: Record<string, { sha256: string; bytes: number }> = {};
  for (const [file, body] of [
    ['model.pt', weights],
    ['optimizer.pt', `${weights}-moments`],
  ] as const) {
    writeFileSync(path.join(dir, file), body);
    files[file] = { sha256: sha(body), bytes: Buffer.byteLength(body) };
  }
  const manifest = JSON.stringify({ files, policy: 'code', version });
  writeFileSync(path.join(dir, 'MANIFEST.json'), manifest);
  writeFileSync(path.join(dir, 'STABLE'), `${sha(manifest)}\n`);
  return { dir, sha256: sha(manifest) };
}

describe('the checkpoint cache', () => {
  const cache = new CheckpointCache(path.join(root, 'cache'));
  const key = sha('what determines it');

  it('has no entry before one is put; a put entry is found with its hash and version, and what it stands for beside it', () => {
    expect(cache.get(key)).toBeNull();
    const cp = checkpointDir('published', 'weights-a', 7);
    const put = cache.put(key, cp.dir, cp.sha256, { steps: 7 });
    expect(put).toEqual({ path: path.join(root, 'cache', key), sha256: cp.sha256, version: 7 });
    expect(cache.get(key)).toEqual(put);
    expect(readFileSync(path.join(put.path, 'model.pt'), 'utf8')).toBe('weights-a');
    expect(JSON.parse(readFileSync(path.join(root, 'cache', `${key}.json`), 'utf8'))).toEqual({ key, sha256: cp.sha256, steps: 7 });
    // The source can go: the entry is a copy.
    rmSync(cp.dir, { recursive: true });
    expect(cache.get(key)).toEqual(put);
  });

  it('keeps the entry a key already has', () => {
    const other = checkpointDir('other', 'weights-b', 7);
    const kept = cache.put(key, other.dir, other.sha256, {});
    expect(kept.sha256).not.toBe(other.sha256);
    expect(readFileSync(path.join(kept.path, 'model.pt'), 'utf8')).toBe('weights-a');
  });

  it('counts a torn entry as none, and a put replaces it', () => {
    const torn = sha('torn');
    const cp = checkpointDir('to-tear', 'weights-c', 3);
    const entry = cache.put(torn, cp.dir, cp.sha256, {});
    truncateSync(path.join(entry.path, 'optimizer.pt'), 2);
    expect(cache.get(torn)).toBeNull();
    expect(cache.put(torn, cp.dir, cp.sha256, {})).toEqual(entry);
    expect(readFileSync(path.join(entry.path, 'optimizer.pt'), 'utf8')).toBe('weights-c-moments');
  });

  it('refuses a source that does not hold the checkpoint, and a key that is not a sha256', () => {
    const cp = checkpointDir('wrong', 'weights-d', 1);
    expect(() => cache.put(sha('x'), cp.dir, sha('another manifest'), {})).toThrow(/does not hold checkpoint/);
    expect(existsSync(path.join(root, 'cache', sha('x')))).toBe(false);
    expect(() => cache.get('../escape')).toThrow(/a cache key is a lowercase hex sha256/);
  });
});
