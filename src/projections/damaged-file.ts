/**
 * A read model, snapshot or ablation variant file that SQLite cannot read, or that is another
 * kind of file: all of them are derived from the log, so the fix is to build them again from it
 * (`crucible replay RUN --rebuild`). Telling such a file apart from a damaged log matters: the
 * log cannot be rebuilt, so a failure is pinned on a derived file only once that file is checked.
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { NotAReadModelError } from './readmodel.js';
import { DamagedFileError } from './errors.js';

export { DamagedFileError };

/** SQLite's codes for a file that is damaged or not a database. */
const DAMAGE_CODES = /^SQLITE_(CORRUPT|NOTADB)/;

/** Whether `err` is SQLite saying that a file is damaged or not a database. */
export function isSqliteDamage(err: unknown): boolean {
  return err instanceof Database.SqliteError && DAMAGE_CODES.test(err.code);
}

/** Why SQLite cannot read `file` whole (null: it can). Opened read-only; nothing is written. */
export function damageOf(file: string): string | null {
  if (!existsSync(file)) return null;
  let db: Database.Database | null = null;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    const result = db.pragma('quick_check', { simple: true });
    return result === 'ok' ? null : `SQLite finds it damaged (${String(result)})`;
  } catch (err) {
    return `SQLite cannot read it (${(err as Error).message})`;
  } finally {
    db?.close();
  }
}

/**
 * Runs `f` (which reads or writes the derived `file`); a failure that is the file's (another kind
 * of file, or damage SQLite reports and a check of the file confirms) becomes a DamagedFileError.
 */
export async function readingDerived<T>(file: string, runDir: string, f: () => Promise<T> | T): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw derivedFailure(err, file, runDir) ?? err;
  }
}

/** The DamagedFileError `err` stands for, when it is `file`'s (see readingDerived). */
export function derivedFailure(err: unknown, file: string, runDir: string): DamagedFileError | null {
  if (err instanceof NotAReadModelError && err.path === file) return new DamagedFileError(file, runDir, err.reason);
  if (!isSqliteDamage(err)) return null;
  const reason = damageOf(file);
  return reason === null ? null : new DamagedFileError(file, runDir, reason);
}
