/**
 * A cache of trained checkpoints shared by the runs of one folder: a checkpoint that many runs
 * would compute alike (a warm start that a run and its controls share) is computed by the first
 * and copied from here by the others. An entry is `<root>/<key>/`, a checkpoint directory as
 * gpu-bridge publishes it (its files, MANIFEST.json, STABLE), and `<root>/<key>.json`, what the
 * key stands for. The key is a sha256 the caller derives from whatever determines the checkpoint.
 * An entry is copied in under a temporary name and renamed: a reader finds a whole entry or none,
 * and one that no longer holds its checkpoint (a file removed or cut) counts as none.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { holdsCheckpoint } from './checkpoint-blobs.js';
import { CheckpointBlobError } from './errors.js';

const KEY = /^[0-9a-f]{64}$/;

export interface CachedCheckpoint {
  /** The entry's directory (absolute). */
  path: string;
  /** The checkpoint's hash (its manifest's sha256). */
  sha256: string;
  /** The policy version it holds (its manifest's). */
  version: number;
}

export class CheckpointCache {
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  #dir(key: string): string {
    // The key names a directory: nothing but a sha256 may reach the file system.
    if (!KEY.test(key)) throw new CheckpointBlobError(`cache entry ${key}`, null, 'a cache key is a lowercase hex sha256');
    return path.join(this.root, key);
  }

  /** The entry under `key`, or null when there is none (or it no longer holds its checkpoint). */
  get(key: string): CachedCheckpoint | null {
    const dir = this.#dir(key);
    let sha256: string;
    try {
      sha256 = readFileSync(path.join(dir, 'STABLE'), 'utf8').trim();
    } catch {
      return null;
    }
    if (!holdsCheckpoint(dir, sha256)) return null;
    const { version } = JSON.parse(readFileSync(path.join(dir, 'MANIFEST.json'), 'utf8')) as { version: number };
    return { path: dir, sha256, version };
  }

  /** Copies the checkpoint directory `from` (hash `sha256`) in as the entry under `key`, with
   * `about` beside it; an entry already there is kept (it holds the same checkpoint, by the key). */
  put(key: string, from: string, sha256: string, about: Record<string, unknown>): CachedCheckpoint {
    const dest = this.#dir(key);
    const held = this.get(key);
    if (held) return held;
    if (!holdsCheckpoint(from, sha256)) throw new CheckpointBlobError(`cache entry ${key}`, null, `${from} does not hold checkpoint ${sha256}`);
    mkdirSync(this.root, { recursive: true });
    const tmp = path.join(this.root, `.tmp-${key.slice(0, 16)}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
    try {
      writeFileSync(`${tmp}.json`, `${JSON.stringify({ key, sha256, ...about }, null, 2)}\n`);
      renameSync(`${tmp}.json`, `${dest}.json`);
      cpSync(from, tmp, { recursive: true });
      if (!holdsCheckpoint(tmp, sha256)) throw new CheckpointBlobError(`cache entry ${key}`, null, `the copy of ${from} does not hold checkpoint ${sha256}`);
      // A torn entry (its process killed mid-copy never renames one in; a file removed since) is replaced.
      if (existsSync(dest) && !this.get(key)) rmSync(dest, { recursive: true, force: true });
      try {
        renameSync(tmp, dest);
      } catch (e) {
        // Another run put the same entry meanwhile: keep it, it may be read already.
        if (!this.get(key)) throw e;
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      rmSync(`${tmp}.json`, { force: true });
    }
    return this.get(key)!;
  }
}
