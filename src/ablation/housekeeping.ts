/**
 * The files `crucible ablate` keeps beside a run, in <run>/ablations: per variant and stop
 * position a read model file `<name>-<key>.db` (the key: its settings, the projection versions
 * and the stop, never its name), a `<name>-<key>.json` naming its settings, and with --execute
 * its own log `<name>-<key>.log.db`. While a call builds them it writes temporary files named
 * after its process id (`.tmp-<pid>-`, `.shared-<pid>`); those of a process that is gone are left
 * by an interruption and removed by the next call.
 */
import { existsSync, readdirSync, readFileSync, rmSync, rmdirSync, statSync, writeFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/** Variant files live beside the run's own read models: <run>/ablations/. */
export const ABLATIONS_DIR = 'ablations';

const KEY = /^(.+)-([0-9a-f]{16})\.db$/;
const TEMPORARY = /\.(?:tmp|shared)-(\d+)/;
const SQLITE_SUFFIXES = ['', '-wal', '-shm'];

/** What a variant file was built from, stored beside it (`<name>-<key>.json`). */
export const StoredVariant = z.strictObject({
  name: z.string(),
  runId: z.string(),
  overrides: z.array(z.strictObject({ key: z.string(), value: z.unknown() })),
  settingsHash: z.string(),
  /** Whether the settings equal the recorded run's. */
  sameAsRecorded: z.boolean(),
  position: z.number().int().nonnegative(),
});
export type StoredVariant = z.infer<typeof StoredVariant>;

const settingsFileOf = (file: string) => file.replace(/\.db$/, '.json');

/** Records what `file` was built from (written whole, then renamed). */
export function writeVariantSettings(file: string, stored: StoredVariant): void {
  const target = settingsFileOf(file);
  const tmp = `${target}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(stored)}\n`);
  renameSync(tmp, target);
}

/** The variant file of this key already in `dir`, under whatever name it was built (null: none). */
export function storedFileOfKey(dir: string, key: string): string | null {
  if (!existsSync(dir)) return null;
  const found = readdirSync(dir)
    .filter((f) => KEY.exec(f)?.[2] === key && !f.endsWith('.log.db'))
    .sort();
  return found.length > 0 ? path.join(dir, found[0]!) : null;
}

function alive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: a process of another user has the id, so it is alive.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the temporary files in `dir` of process `pid` (default: those of every process that
 * is gone). Returns the names removed. */
export function removeTemporaries(dir: string, pid?: number): string[] {
  if (!existsSync(dir)) return [];
  const removed: string[] = [];
  for (const f of readdirSync(dir)) {
    const m = TEMPORARY.exec(f);
    if (!m) continue;
    const owner = Number(m[1]);
    if (pid !== undefined ? owner !== pid : alive(owner)) continue;
    rmSync(path.join(dir, f), { force: true });
    removed.push(f);
  }
  return removed.sort();
}

export interface ListedVariant {
  file: string;
  bytes: number;
  /** null: a file built before settings were stored beside it, or whose record is unreadable. */
  settings: StoredVariant | null;
  /** The variant's own execution log (--execute), if any. */
  log: string | null;
}

/** The variant files kept in `dir`, by name. */
export function listVariants(dir: string): ListedVariant[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => KEY.test(f) && !f.endsWith('.log.db'))
    .sort()
    .map((f) => {
      const file = path.join(dir, f);
      const log = file.replace(/\.db$/, '.log.db');
      let settings: StoredVariant | null = null;
      try {
        settings = StoredVariant.parse(JSON.parse(readFileSync(settingsFileOf(file), 'utf8')));
      } catch {
        settings = null;
      }
      const bytes = SQLITE_SUFFIXES.reduce((n, s) => n + (existsSync(`${file}${s}`) ? statSync(`${file}${s}`).size : 0), 0);
      return { file, bytes, settings, log: existsSync(log) ? log : null };
    });
}

/** Removes the variants' read model files (and their records) in <run>/ablations, keeping their
 * execution logs (work a variant ran, which the log does not hold). Returns how many. */
export function removeVariantReadModels(runDir: string): number {
  const dir = path.join(runDir, ABLATIONS_DIR);
  const listed = listVariants(dir);
  for (const v of listed) {
    for (const s of SQLITE_SUFFIXES) rmSync(`${v.file}${s}`, { force: true });
    rmSync(settingsFileOf(v.file), { force: true });
  }
  return listed.length;
}

/** Removes everything ablate keeps in `dir` (variant files, records, execution logs, temporary
 * files of processes that are gone), then the directory when nothing else is in it. Returns the
 * files removed and their bytes. */
export function cleanAblations(dir: string): { files: number; bytes: number } {
  if (!existsSync(dir)) return { files: 0, bytes: 0 };
  let files = 0;
  let bytes = 0;
  const ours = (f: string) => {
    const temporary = TEMPORARY.exec(f);
    if (temporary) return !alive(Number(temporary[1]));
    const base = f.replace(/(-wal|-shm)$/, '');
    return /^.+-[0-9a-f]{16}(\.log)?\.db$/.test(base) || /^.+-[0-9a-f]{16}\.json$/.test(base);
  };
  for (const f of readdirSync(dir)) {
    if (!ours(f)) continue;
    const file = path.join(dir, f);
    bytes += statSync(file).size;
    rmSync(file, { force: true });
    files++;
  }
  if (readdirSync(dir).length === 0) rmdirSync(dir);
  return { files, bytes };
}
