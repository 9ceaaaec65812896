/**
 * The export's tables as declared: docs/export.md lists each with every column's type,
 * nullability and meaning exactly as the code writes them; the Parquet writer refuses a row that
 * does not fit its table (naming table, row and column) and leaves no file; an empty table is a
 * file with its columns and no rows.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { afterAll, describe, expect, it } from 'vitest';
import { EXPORT_TABLES } from '../../src/report/export-tables.js';
import { TableRowError, writeParquetTable, type TableSpec } from '../../src/report/parquet-table.js';

const DOC = readFileSync(path.join(import.meta.dirname, '../../docs/export.md'), 'utf8');
const TYPES: Record<string, string> = { string: 'STRING', int32: 'INT32', int64: 'INT64', double: 'DOUBLE', boolean: 'BOOLEAN', json: 'JSON' };

/** The tables docs/export.md documents: `### \`<name>.parquet\`` then a table of columns. */
function documented(): Map<string, string[][]> {
  const out = new Map<string, string[][]>();
  for (const section of DOC.split(/^### /m).slice(1)) {
    const name = /^`([a-z_]+)\.parquet`/.exec(section)?.[1];
    if (!name) continue;
    const rows = section
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .map((l) =>
        l
          .slice(2, -2)
          .split(' | ')
          .map((cell) => cell.trim()),
      );
    out.set(name, rows);
  }
  return out;
}

const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-export-schema-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the export schema', () => {
  it('docs/export.md lists every table and every column with its type, nullability and meaning', () => {
    const docs = documented();
    expect([...docs.keys()]).toEqual(EXPORT_TABLES.map((t) => t.name));
    for (const t of EXPORT_TABLES) {
      expect(DOC).toContain(`### \`${t.name}.parquet\`\n\n${t.doc}\n`);
      expect(docs.get(t.name)).toEqual(t.columns.map((c) => [`\`${c.name}\``, TYPES[c.type], c.nullable ? 'yes' : 'no', c.doc]));
      for (const c of t.columns) expect(c.doc.length).toBeGreaterThan(10);
    }
  });

  const spec: TableSpec = {
    name: 'sample',
    doc: 'a table for the test',
    columns: [
      { name: 'id', type: 'string', nullable: false, doc: 'id' },
      { name: 'n', type: 'int32', nullable: true, doc: 'n' },
      { name: 'seed', type: 'int64', nullable: false, doc: 'seed' },
      { name: 'extra', type: 'json', nullable: true, doc: 'extra' },
    ],
  };

  it('writes rows of every type and reads them back; int64 past 2^31 stays exact', async () => {
    const file = path.join(root, 'ok.parquet');
    const rows = [
      { id: 'a', n: 1, seed: 2 ** 40 + 3, extra: { k: [1, 2] } },
      { id: 'b', n: null, seed: -5, extra: null },
    ];
    expect(await writeParquetTable(file, spec, rows, { 'crucible.table': 'sample' })).toBe(2);
    const buffer = await asyncBufferFromFile(file);
    const meta = await parquetMetadataAsync(buffer);
    expect(meta.key_value_metadata).toEqual([{ key: 'crucible.table', value: 'sample' }]);
    expect(await parquetReadObjects({ file: buffer })).toEqual([
      { id: 'a', n: 1, seed: BigInt(2 ** 40 + 3), extra: { k: [1, 2] } },
      { id: 'b', n: null, seed: -5n, extra: null },
    ]);
  });

  it('an empty table is a file with its columns and no rows', async () => {
    const file = path.join(root, 'empty.parquet');
    expect(await writeParquetTable(file, spec, [])).toBe(0);
    const buffer = await asyncBufferFromFile(file);
    expect((await parquetMetadataAsync(buffer)).schema.slice(1).map((s) => s.name)).toEqual(['id', 'n', 'seed', 'extra']);
    expect(await parquetReadObjects({ file: buffer })).toEqual([]);
  });

  it('a row that does not fit is refused by table, row and column, and no file is left', async () => {
    const dir = mkdtempSync(path.join(root, 'bad-'));
    const cases: [Record<string, unknown>, string][] = [
      [{ id: 'x', n: 1.5, seed: 1 }, 'sample row 1: column n is not int32: 1.5'],
      [{ id: 'x', n: 2 ** 31, seed: 1 }, `sample row 1: column n is not int32: ${2 ** 31}`],
      [{ id: null, n: 1, seed: 1 }, 'sample row 1: column id is null, but it is required'],
      [{ id: 'x', n: 1, seed: 2 ** 53 }, `sample row 1: column seed is not int64: ${2 ** 53}`],
      [{ id: 7, n: 1, seed: 1 }, 'sample row 1: column id is not string: 7'],
    ];
    for (const [bad, message] of cases) {
      const file = path.join(dir, 'bad.parquet');
      const err = await writeParquetTable(file, spec, [{ id: 'ok', n: 0, seed: 0 }, bad]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TableRowError);
      expect((err as Error).message).toBe(message);
      expect(existsSync(file)).toBe(false);
    }
    expect(readdirSync(dir)).toEqual([]);
  });
});
