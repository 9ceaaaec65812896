/**
 * WAL mode as every crucible SQLite file written by a run uses it (the log, the read models, the
 * actors' snapshots), checkpointed once the WAL holds WAL_CHECKPOINT_BYTES rather than SQLite's
 * default of 1,000 pages (4 MB at 4 KiB pages). A checkpoint writes each page changed since the
 * last one, so a page changed again and again (the last leaf of the log, the leaves of an index
 * that takes keys at random) is written once per checkpoint: fewer checkpoints, fewer such writes.
 * Measured on `bench scale --fraction 0.05` (docs/measurements.md): 669 bytes written to storage
 * per result at the default, 604 at 64 MB, 570 at 256 MB. 64 MB bounds the WAL's disk and the
 * work of opening a file whose writer was killed (its WAL is read whole).
 */
import type Database from 'better-sqlite3';

export const WAL_CHECKPOINT_BYTES = 64 * 1024 * 1024;

/** Puts an open database in WAL mode with the checkpoint interval above (its pages, at the file's page size). */
export function useWal(db: Database.Database): void {
  db.pragma('journal_mode = WAL');
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  db.pragma(`wal_autocheckpoint = ${Math.max(1, Math.round(WAL_CHECKPOINT_BYTES / pageSize))}`);
}
