/**
 * Published checkpoints in the log's blob store, so a version trained on one machine can be
 * loaded on another with nothing shared but the log. A gpu-bridge checkpoint directory holds its
 * files, `MANIFEST.json` (version, and each file's sha256 and size) and `STABLE` (the manifest's
 * sha256, which is the checkpoint's hash). Stored: every file as a blob under its own sha256, and
 * the manifest's exact bytes as a blob under the checkpoint's hash, so the checkpoint's hash alone
 * is enough to put the directory back together.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { sha256Hex, type BlobStore } from '../events/blobs.js';
import { BlobCorruptError, BlobNotFoundError } from '../events/errors.js';
import { CheckpointBlobError } from './errors.js';

const MANIFEST = 'MANIFEST.json';
const STABLE = 'STABLE';
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a lowercase hex sha256');

/** A checkpoint's files: name (relative to its directory) -> sha256 and size in bytes. */
export const CheckpointFiles = z.record(z.string(), z.strictObject({ sha256: Sha256, bytes: z.number().int().nonnegative() }));
export type CheckpointFiles = z.infer<typeof CheckpointFiles>;

const Manifest = z.looseObject({ version: z.number().int().nonnegative(), files: CheckpointFiles });

/** Where a published checkpoint is: the directory it was written to (on the trainer's disk), its
 * hash, and (for checkpoints in the blob store) its files. */
export interface CheckpointRef {
  path: string;
  sha256: string;
  files?: CheckpointFiles;
}

/** A file name from a manifest stays inside the checkpoint directory. */
function safeName(label: string, name: string): string {
  const norm = path.posix.normalize(name);
  if (name === '' || path.isAbsolute(name) || norm.startsWith('..') || norm === '.' || name.includes('\\') || name === MANIFEST || name === STABLE) {
    throw new CheckpointBlobError(label, name, 'the manifest names a file outside the checkpoint directory or one of its own markers');
  }
  return norm;
}

function parseManifest(label: string, body: Uint8Array): z.infer<typeof Manifest> {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch (e) {
    throw new CheckpointBlobError(label, MANIFEST, `not JSON (${(e as Error).message})`);
  }
  const m = Manifest.safeParse(raw);
  if (!m.success) throw new CheckpointBlobError(label, MANIFEST, `not a checkpoint manifest: ${m.error.message}`);
  for (const name of Object.keys(m.data.files)) safeName(label, name);
  return m.data;
}

/**
 * Puts a published checkpoint directory into the blob store: each file (checked against the
 * manifest first, so a file changed on disk is not stored under the manifest's name), then the
 * manifest. Returns the files, for the version's parameters.
 */
export async function storeCheckpoint(dir: string, sha256: string, blobs: BlobStore, label: string): Promise<CheckpointFiles> {
  const body = readFileSync(path.join(dir, MANIFEST));
  if (sha256Hex(body) !== sha256)
    throw new CheckpointBlobError(label, MANIFEST, `${dir} holds a manifest with sha256 ${sha256Hex(body)}, not the published ${sha256}`);
  const manifest = parseManifest(label, body);
  for (const [name, f] of Object.entries(manifest.files)) {
    const bytes = readFileSync(path.join(dir, name));
    const got = sha256Hex(bytes);
    if (got !== f.sha256 || bytes.byteLength !== f.bytes)
      throw new CheckpointBlobError(label, name, `${dir} holds ${bytes.byteLength} bytes with sha256 ${got}; the manifest says ${f.bytes} bytes, ${f.sha256}`);
    await blobs.put(bytes);
  }
  // The manifest last: once it is stored, every file it names is.
  await blobs.put(body);
  return manifest.files;
}

/** The directory holds this checkpoint: its markers name the hash and every file has its size
 * (the bridge checks every file's sha256 when it loads one). */
export function holdsCheckpoint(dir: string, sha256: string): boolean {
  try {
    if (readFileSync(path.join(dir, STABLE), 'utf8').trim() !== sha256) return false;
    const body = readFileSync(path.join(dir, MANIFEST));
    if (sha256Hex(body) !== sha256) return false;
    const m = Manifest.safeParse(JSON.parse(body.toString('utf8')));
    if (!m.success) return false;
    return Object.entries(m.data.files).every(([name, f]) => {
      const p = path.join(dir, name);
      return existsSync(p) && statSync(p).size === f.bytes;
    });
  } catch {
    return false;
  }
}

async function blob(blobs: BlobStore, hash: string, label: string, file: string): Promise<Uint8Array> {
  try {
    return await blobs.get(hash);
  } catch (e) {
    if (e instanceof BlobNotFoundError) throw new CheckpointBlobError(label, file, `blob ${hash} is not in the blob store`);
    if (e instanceof BlobCorruptError) throw new CheckpointBlobError(label, file, `blob ${hash} is corrupt (its bytes no longer match their sha256)`);
    throw e;
  }
}

/**
 * A local directory holding the checkpoint: the published path when it is there and whole (the
 * trainer's own disk), else `<cacheRoot>/<sha256>`, put together from the blob store by hash
 * (each file checked against the manifest's sha256 and size; written under a temporary name and
 * renamed, so a reader never finds half a copy). `label` names the version in errors.
 */
export async function localCheckpoint(ref: CheckpointRef, blobs: BlobStore | null, cacheRoot: string, label: string): Promise<string> {
  if (holdsCheckpoint(ref.path, ref.sha256)) return ref.path;
  const dest = path.resolve(cacheRoot, ref.sha256);
  if (holdsCheckpoint(dest, ref.sha256)) return dest;
  if (!blobs) throw new CheckpointBlobError(label, null, `${ref.path} is missing or differs, and no blob store is at hand to read it from`);
  const body = await blob(blobs, ref.sha256, label, MANIFEST);
  if (sha256Hex(body) !== ref.sha256) throw new CheckpointBlobError(label, MANIFEST, `blob ${ref.sha256} has other bytes`);
  const manifest = parseManifest(label, body);
  if (ref.files) {
    // The parameters' list and the stored manifest must agree, file for file.
    const a = JSON.stringify(Object.entries(ref.files).sort(([x], [y]) => (x < y ? -1 : 1)));
    const b = JSON.stringify(
      Object.entries(manifest.files)
        .sort(([x], [y]) => (x < y ? -1 : 1))
        .map(([n, f]) => [n, { sha256: f.sha256, bytes: f.bytes }]),
    );
    if (a !== b) throw new CheckpointBlobError(label, MANIFEST, "the stored manifest lists other files than the version's parameters");
  }
  const tmp = `${dest}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  mkdirSync(tmp, { recursive: true });
  try {
    for (const [name, f] of Object.entries(manifest.files)) {
      const bytes = await blob(blobs, f.sha256, label, name);
      const got = sha256Hex(bytes);
      if (got !== f.sha256 || bytes.byteLength !== f.bytes)
        throw new CheckpointBlobError(label, name, `blob has ${bytes.byteLength} bytes with sha256 ${got}; the manifest says ${f.bytes} bytes, ${f.sha256}`);
      const p = path.join(tmp, safeName(label, name));
      mkdirSync(path.dirname(p), { recursive: true });
      writeFileSync(p, bytes);
    }
    writeFileSync(path.join(tmp, MANIFEST), body);
    writeFileSync(path.join(tmp, STABLE), `${ref.sha256}\n`);
    // Another reader of this cache (a second sampler process) may have finished the same copy
    // meanwhile: keep it, it may be loading. Only a torn or foreign directory is replaced.
    if (holdsCheckpoint(dest, ref.sha256)) return dest;
    if (existsSync(dest)) rmSync(dest, { recursive: true, force: true });
    try {
      renameSync(tmp, dest);
    } catch (e) {
      if (!holdsCheckpoint(dest, ref.sha256)) throw e;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return dest;
}
