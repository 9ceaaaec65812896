/**
 * Where each packed blob lives (its hash -> its place in blob_packs), kept so that putting a blob
 * writes only at the end of the file's trees.
 *
 * A hash is random: an index keyed by it takes each new key on a random leaf, and a commit of a
 * suite's 64 tests rewrote 64 leaves of a tree that grows with the run (4 KB each, once in the WAL
 * and again at the checkpoint): the bytes the loop wrote per result grew fivefold over a run of
 * 23 steps. Here the packs written since the last merge are the index's newest part: a process
 * finds their members in memory (`#unindexed`, filled as it writes them and, on a miss, by reading
 * the packs other processes wrote). Every MERGE_PACKS packs they are written as a sorted run (rows
 * keyed by run, then hash prefix: a new run lands at the end of its table), and FANOUT runs of one
 * tier are merged into one of the next, so an entry is rewritten once per tier (a handful of
 * times over a run) instead of a page per blob. A lookup probes every run (a dozen at most over a
 * full run), then `blob_members`, where files of format 3 and before keep theirs.
 *
 * Merges are done in slices, one after each append, in proportion to the packs it wrote (see
 * SLICE_PER_PACK), one merge of each tier going on at once: a merge of millions of entries done at
 * once made the step that carried it write twice what the others did. Each slice moves the
 * smallest entries left in a merge's sources into its new run and deletes them there, in one
 * transaction, so every entry is in exactly one run at all times and a lookup (which probes every
 * run) finds it wherever the merge stands. Where the merges stand is kept in crucible_meta
 * (`blob-merge`), so another process or a later one goes on with them; one whose runs are gone is
 * dropped (its entries are still in the runs that hold them).
 *
 * Entries name a place by the first 52 bits of a hash; the store checks each candidate member
 * against the full hash, so two blobs sharing those bits (about one pair in 2^26) are both found.
 */
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { sha256Hex } from '../blobs.js';

export const PACK_SIZE = 64;
/** Packs above the watermark that make a run. */
const MERGE_PACKS = 1024;
/** Runs of one tier merged into one of the next. */
const FANOUT = 4;

export interface BlobIndexOptions {
  /** Packs above the watermark that make a run (default 1024). */
  mergePacks?: number;
  /** Runs of one tier merged into one of the next (default 4). */
  fanout?: number;
  /** Entries each merge in progress moves per pack written since the last slice (default
   * SLICE_PER_PACK). */
  slicePerPack?: number;
}
/** crucible_meta: pack ids at or below it have their members in a run or in blob_members. */
const WATERMARK_KEY = 'blob-packs-indexed';
/** crucible_meta: the merges in progress (at most one a tier), MergeState[] as JSON. */
const MERGE_KEY = 'blob-merge';

/** A merge in progress: runs `sources` of `tier` into `run`, every entry up to `after` (prefix,
 * place) moved. */
const MergeState = z.strictObject({
  run: z.number().int().positive(),
  tier: z.number().int().nonnegative(),
  sources: z.array(z.number().int().positive()).min(1),
  after: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]).nullable(),
});
type MergeState = z.infer<typeof MergeState>;
/** Entries each merge in progress moves per pack written: a merge of tier k's runs has at most
 * PACK_SIZE entries for each pack written while tier k fills again, so one and a half times
 * that finishes it in two thirds of that time, every tier's merge going on at once. */
const SLICE_PER_PACK = (3 * PACK_SIZE) / 2;

/** The first 52 bits of a hex sha256, as a safe integer. */
export const prefixOf = (hash: string): number => parseInt(hash.slice(0, 13), 16);

const TABLES = `
CREATE TABLE IF NOT EXISTS blob_packs (id INTEGER PRIMARY KEY, bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS blob_members (prefix INTEGER PRIMARY KEY, place INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blob_runs (run INTEGER PRIMARY KEY, tier INTEGER NOT NULL, entries INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blob_run_members (run INTEGER NOT NULL, prefix INTEGER NOT NULL, place INTEGER NOT NULL, PRIMARY KEY (run, prefix, place)) WITHOUT ROWID;
`;

/** The members of a pack, or undefined when it does not read. */
export type PackReader = (id: number) => Buffer[] | undefined;

export class PackedBlobIndex {
  readonly #db: Database.Database;
  readonly #readPack: PackReader;
  /** Members of packs above the watermark: hash -> place. */
  #unindexed = new Map<string, number>();
  /** Every pack id at or below it is at or below the watermark or in #unindexed. */
  #scannedThrough: number;
  #watermark: number;
  /** The last pack id this process wrote. */
  #lastPack = 0;
  #runPlaces: Database.Statement | undefined;
  #basePlace: Database.Statement | undefined;
  #packsAfter: Database.Statement | undefined;
  readonly #readWatermark: Database.Statement;

  readonly #mergePacks: number;
  readonly #fanout: number;
  readonly #slicePerPack: number | undefined;
  /** False once a slice found no merge in progress: appends then take no transaction for merges
   * until a run is due (the file, not this, says which merges are in progress). */
  #merging = true;
  /** The last pack id when this process last moved a slice. */
  #slicedThrough: number | undefined;

  constructor(db: Database.Database, readPack: PackReader, opts: BlobIndexOptions = {}) {
    this.#db = db;
    this.#readPack = readPack;
    this.#mergePacks = opts.mergePacks ?? MERGE_PACKS;
    this.#fanout = Math.max(2, opts.fanout ?? FANOUT);
    this.#slicePerPack = opts.slicePerPack;
    if (!db.readonly) {
      db.exec(TABLES);
      // A file without the row was written before runs existed: all its packs are in blob_members.
      db.prepare(`INSERT OR IGNORE INTO crucible_meta (key, value) SELECT ?, coalesce(max(id), 0) FROM blob_packs`).run(WATERMARK_KEY);
    }
    this.#readWatermark = db.prepare('SELECT value FROM crucible_meta WHERE key = ?').pluck();
    this.#prepare();
    this.#watermark = this.#storedWatermark();
    this.#scannedThrough = this.#watermark;
  }

  /** Statements on the tables the file has (a file opened read-only may predate some; a writer
   * may add them while it is open). */
  #prepare(): void {
    if (this.#runPlaces && this.#basePlace && this.#packsAfter) return;
    const tables = new Set(this.#db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).pluck().all() as string[]);
    if (tables.has('blob_run_members') && tables.has('blob_runs')) {
      this.#runPlaces ??= this.#db.prepare('SELECT place FROM blob_run_members WHERE run IN (SELECT run FROM blob_runs) AND prefix = ?').pluck();
    }
    if (tables.has('blob_members')) this.#basePlace ??= this.#db.prepare('SELECT place FROM blob_members WHERE prefix = ?').pluck();
    if (tables.has('blob_packs')) this.#packsAfter ??= this.#db.prepare('SELECT id FROM blob_packs WHERE id > ? ORDER BY id').pluck();
  }

  /** The stored watermark; a file read-only and without one has all its packs in blob_members. */
  #storedWatermark(): number {
    const v = this.#readWatermark.get(WATERMARK_KEY) as string | undefined;
    if (v === undefined) return Number.POSITIVE_INFINITY;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`the log's crucible_meta row "${WATERMARK_KEY}" holds ${JSON.stringify(v)}, not a pack number`);
    return n;
  }

  /** A pack this process wrote, once its transaction committed. */
  added(id: number, hashes: readonly string[]): void {
    // A slice is paid for by the packs this process writes from now on.
    this.#slicedThrough ??= id - 1;
    hashes.forEach((h, i) => this.#unindexed.set(h, id * PACK_SIZE + i));
    if (id === this.#scannedThrough + 1) this.#scannedThrough = id;
    this.#lastPack = Math.max(this.#lastPack, id);
  }

  /** Places that may hold the blob (to be checked against its hash), newest first; lazily, so
   * a blob found in memory costs no query. */
  *placesOf(hash: string): Generator<number> {
    const recent = this.#unindexed.get(hash);
    if (recent !== undefined) yield recent;
    const prefix = prefixOf(hash);
    if (this.#runPlaces) yield* this.#runPlaces.all(prefix) as number[];
    if (this.#basePlace) {
      const p = this.#basePlace.get(prefix) as number | undefined;
      if (p !== undefined) yield p;
    }
  }

  /** Packs above the watermark that did not read: a blob not found may have been in one. */
  readonly #unreadable = new Set<number>();

  get unreadablePacks(): number {
    return this.#unreadable.size;
  }

  /** After a miss: takes in what other connections wrote since this one last looked (the
   * packs, a new watermark, the tables of a file they upgraded); -> whether anything changed. */
  catchUp(): boolean {
    const had = this.#runPlaces !== undefined;
    this.#prepare();
    let changed = !had && this.#runPlaces !== undefined;
    if (!this.#packsAfter) return changed;
    const stored = this.#storedWatermark();
    // Read-only on a file of format 3 that a writer has since opened: its runs start there.
    if (this.#watermark === Number.POSITIVE_INFINITY && stored !== this.#watermark) {
      this.#watermark = this.#scannedThrough = stored;
      changed = true;
    }
    if (stored > this.#watermark) {
      this.#forgetThrough(stored);
      changed = true;
    }
    for (const id of this.#packsAfter.all(Math.max(this.#scannedThrough, this.#watermark)) as number[]) {
      const members = this.#readPack(id);
      if (members !== undefined) members.forEach((m, i) => this.#unindexed.set(sha256Hex(m), id * PACK_SIZE + i));
      else this.#unreadable.add(id);
      this.#scannedThrough = id;
      changed = true;
    }
    return changed;
  }

  /** Writes the packs above the watermark as a run when enough have gathered, and moves a slice
   * of the merge in progress (starting one where a tier is full), in a transaction of its own:
   * called after an append commits. */
  mergeIfDue(): void {
    if (this.#db.readonly) return;
    const runDue = this.#lastPack - this.#watermark >= this.#mergePacks;
    const packs = Math.max(0, this.#lastPack - (this.#slicedThrough ?? this.#lastPack));
    if (!runDue && !(this.#merging && packs > 0)) return;
    let through = 0;
    this.#db
      .transaction(() => {
        const from = this.#storedWatermark();
        through = Math.max(from, this.#watermark);
        const last = (this.#db.prepare('SELECT coalesce(max(id), 0) FROM blob_packs').pluck().get() as number) ?? 0;
        if (last - from >= this.#mergePacks) {
          this.#writeRun(this.#entriesOf(from, last));
          this.#db.prepare('UPDATE crucible_meta SET value = ? WHERE key = ?').run(String(last), WATERMARK_KEY);
          through = last;
        }
        this.#merging = this.#mergeSlice(packs);
      })
      .immediate();
    this.#slicedThrough = this.#lastPack;
    this.#forgetThrough(through);
  }

  readonly #statements = new Map<string, Database.Statement>();
  /** A statement prepared once per connection (slices run after every append while merging). */
  #sql(text: string): Database.Statement {
    let st = this.#statements.get(text);
    if (st === undefined) this.#statements.set(text, (st = this.#db.prepare(text)));
    return st;
  }

  /** The merges in progress, as crucible_meta holds them. */
  #readMerges(): MergeState[] {
    const v = this.#readWatermark.get(MERGE_KEY) as string | undefined;
    if (v === undefined) return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(v);
    } catch {
      parsed = undefined;
    }
    const merges = z.array(MergeState).safeParse(parsed);
    if (merges.success) return merges.data;
    throw new Error(`the log's crucible_meta row "${MERGE_KEY}" holds ${JSON.stringify(v.slice(0, 200))}, not a list of merges in progress`);
  }

  #writeMerges(merges: readonly MergeState[]): void {
    if (merges.length === 0) this.#sql('DELETE FROM crucible_meta WHERE key = ?').run(MERGE_KEY);
    else this.#sql('INSERT OR REPLACE INTO crucible_meta (key, value) VALUES (?, ?)').run(MERGE_KEY, JSON.stringify(merges));
  }

  /** Moves a slice of each merge in progress (for `packs` packs written), starting one for each
   * full tier; -> whether any merge is still in progress. */
  #mergeSlice(packs: number): boolean {
    const budget = packs * (this.#slicePerPack ?? SLICE_PER_PACK);
    let merges = this.#readMerges().filter((m) => {
      if (this.#runsExist([m.run, ...m.sources])) return true;
      // Its runs were changed by another hand: every entry is still in exactly one run, and
      // the part merged is a sorted run like any other, merged again from tier 0.
      this.#sql('UPDATE blob_runs SET tier = 0 WHERE run = ? AND tier = -1').run(m.run);
      return false;
    });
    for (;;) {
      merges = [...merges, ...this.#startMerges(merges)];
      const left: MergeState[] = [];
      let finished = false;
      for (const m of merges) {
        if (budget > 0 && this.#moveSlice(m, budget)) {
          this.#finishMerge(m);
          finished = true;
        } else left.push(m);
      }
      merges = left;
      // A finished merge may have filled the next tier.
      if (!finished) break;
    }
    this.#writeMerges(merges);
    return merges.length > 0;
  }

  #runsExist(runs: readonly number[]): boolean {
    const found = this.#sql(`SELECT count(*) FROM blob_runs WHERE run IN (${runs.map(() => '?').join(', ')})`)
      .pluck()
      .get(...runs) as number;
    return found === runs.length;
  }

  /** A merge for each full tier that has none (of its oldest FANOUT runs into a new run). */
  #startMerges(merging: readonly MergeState[]): MergeState[] {
    const busy = new Set(merging.flatMap((m) => m.sources));
    const started: MergeState[] = [];
    const byTier = new Map<number, number[]>();
    for (const [run, tier] of this.#sql('SELECT run, tier FROM blob_runs WHERE tier >= 0 ORDER BY run').raw().all() as [number, number][]) {
      if (busy.has(run)) continue;
      const runs = byTier.get(tier) ?? [];
      runs.push(run);
      byTier.set(tier, runs);
    }
    const tiersMerging = new Set(merging.map((m) => m.tier));
    for (const [tier, runs] of [...byTier].sort((a, b) => a[0] - b[0])) {
      if (runs.length < this.#fanout || tiersMerging.has(tier)) continue;
      const run = this.#nextRun();
      // In tier -1 while it fills: counted in no tier, so no merge takes it in before it is whole.
      this.#sql('INSERT INTO blob_runs (run, tier, entries) VALUES (?, -1, 0)').run(run);
      started.push({ run, tier, sources: runs.slice(0, this.#fanout), after: null });
    }
    return started;
  }

  /** Moves the `budget` smallest entries left in the merge's sources into its run and deletes
   * them from the sources; -> whether the sources are now empty. */
  #moveSlice(m: MergeState, budget: number): boolean {
    const next =
      m.after === null
        ? this.#sql('SELECT prefix, place FROM blob_run_members WHERE run = ? ORDER BY prefix, place LIMIT ?')
        : this.#sql('SELECT prefix, place FROM blob_run_members WHERE run = ? AND (prefix, place) > (?, ?) ORDER BY prefix, place LIMIT ?');
    const candidates: [number, number][] = [];
    for (const source of m.sources)
      for (const row of (m.after === null ? next.raw().all(source, budget) : next.raw().all(source, ...m.after, budget)) as [number, number][])
        candidates.push(row);
    candidates.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const taken = candidates.slice(0, budget);
    if (taken.length === 0) return true;
    const insert = this.#sql('INSERT OR IGNORE INTO blob_run_members (run, prefix, place) VALUES (?, ?, ?)');
    let added = 0;
    for (const [prefix, place] of taken) added += insert.run(m.run, prefix, place).changes;
    const upTo = taken[taken.length - 1]!;
    const drop = this.#sql('DELETE FROM blob_run_members WHERE run = ? AND (prefix, place) <= (?, ?)');
    const less = this.#sql('UPDATE blob_runs SET entries = entries - ? WHERE run = ?');
    for (const source of m.sources) less.run(drop.run(source, ...upTo).changes, source);
    this.#sql('UPDATE blob_runs SET entries = entries + ? WHERE run = ?').run(added, m.run);
    m.after = upTo;
    return taken.length < budget;
  }

  #finishMerge(m: MergeState): void {
    const list = m.sources.map(() => '?').join(', ');
    this.#sql(`DELETE FROM blob_run_members WHERE run IN (${list})`).run(...m.sources);
    this.#sql(`DELETE FROM blob_runs WHERE run IN (${list})`).run(...m.sources);
    this.#sql('UPDATE blob_runs SET tier = ? WHERE run = ?').run(m.tier + 1, m.run);
  }

  /** (prefix, place) of every member of the packs in (from, through], sorted. */
  #entriesOf(from: number, through: number): [number, number][] {
    const out: [number, number][] = [];
    // This process's memory holds them when it has seen every pack since `from`.
    if (this.#watermark <= from && this.#scannedThrough >= through) {
      const low = (from + 1) * PACK_SIZE;
      const high = (through + 1) * PACK_SIZE;
      for (const [hash, place] of this.#unindexed) if (place >= low && place < high) out.push([prefixOf(hash), place]);
    } else {
      for (const id of this.#packsAfter!.all(from) as number[]) {
        if (id > through) break;
        const members = this.#readPack(id);
        if (members !== undefined) members.forEach((m, i) => out.push([prefixOf(sha256Hex(m)), id * PACK_SIZE + i]));
      }
    }
    return out.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  }

  #nextRun(): number {
    return ((this.#db.prepare('SELECT coalesce(max(run), 0) FROM blob_runs').pluck().get() as number) ?? 0) + 1;
  }

  #writeRun(entries: readonly [number, number][]): void {
    const run = this.#nextRun();
    const insert = this.#db.prepare('INSERT OR IGNORE INTO blob_run_members (run, prefix, place) VALUES (?, ?, ?)');
    for (const [prefix, place] of entries) insert.run(run, prefix, place);
    this.#db.prepare('INSERT INTO blob_runs (run, tier, entries) VALUES (?, 0, ?)').run(run, entries.length);
  }

  /** The watermark moved to `through`: members of packs at or below it are found in the runs. */
  #forgetThrough(through: number): void {
    if (through <= this.#watermark) return;
    this.#watermark = through;
    const high = (through + 1) * PACK_SIZE;
    // A new map rather than deletes: a Map keeps deleted entries as holes until it is rebuilt.
    const kept = new Map<string, number>();
    for (const [hash, place] of this.#unindexed) if (place >= high) kept.set(hash, place);
    this.#unindexed = kept;
    this.#scannedThrough = Math.max(this.#scannedThrough, through);
  }
}
