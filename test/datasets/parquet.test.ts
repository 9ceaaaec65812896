/**
 * Datasets read from Parquet files shaped like the Hugging Face Hub's shards (written here from
 * the project's own fixture rows): the same rows as the Hub's JSON give the same problems and the
 * same row errors, which also name the file and its row; shards are one table; every codec the
 * Hub's writers use is read; a file that is not Parquet, or is damaged, is one clear error.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetMetadata } from 'hyparquet';
import { afterAll, describe, expect, it } from 'vitest';
import { describeRowError, loadDataset, type RowError } from '../../src/datasets/loaders/index.js';
import { plainValue } from '../../src/datasets/parquet.js';
import { writeHubParquet, zstdStoredFrame, type Codec, type HubDataset } from '../support/hub-parquet.js';
import { runMain } from '../support/cli.js';
import { readProblemFile } from '../../src/datasets/problemFile.js';
import { compressors } from 'hyparquet-compressors';

const FIX = join(import.meta.dirname, '../fixtures/datasets');
const fixtureRows = (name: string): Record<string, unknown>[] =>
  readFileSync(join(FIX, name), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

const root = mkdtempSync(join(tmpdir(), 'crucible-parquet-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dir = '';
/** A folder of the test's own. */
const fresh = () => (dir = mkdtempSync(join(root, 'case-')));

/** A row error without where it is, to compare errors of one row read from JSON and Parquet. */
const what = (e: RowError) => ({ index: e.index, id: e.id, reason: e.reason });

/** The cases: each dataset's fixture rows (the JSON the Hub exports), and its Hub schema. MBPP's
 * fixture mixes the full and sanitized configs, which the Hub keeps in files of their own. */
const CASES: { format: string; json: string; parquet: HubDataset; rows?: (r: Record<string, unknown>) => boolean }[] = [
  { format: 'codecontests', json: 'codecontests.jsonl', parquet: 'codecontests' },
  { format: 'taco', json: 'taco.jsonl', parquet: 'taco' },
  { format: 'apps', json: 'apps.jsonl', parquet: 'apps' },
  { format: 'mbpp', json: 'mbpp.jsonl', parquet: 'mbpp-full', rows: (r) => !('prompt' in r) },
  { format: 'mbpp', json: 'mbpp.jsonl', parquet: 'mbpp-sanitized', rows: (r) => 'prompt' in r },
  { format: 'livecodebench', json: 'livecodebench.jsonl', parquet: 'livecodebench' },
];

describe('Parquet datasets shaped like the Hub', () => {
  for (const c of CASES) {
    it(`${c.parquet}: the Hub's columns in Parquet give the problems and row errors its JSON gives`, async () => {
      fresh();
      const rows = fixtureRows(c.json).filter(c.rows ?? (() => true));
      const jsonFile = join(dir, 'rows.jsonl');
      writeFileSync(jsonFile, rows.map((r) => JSON.stringify(r)).join('\n'));
      const file = join(dir, 'train-00000-of-00001.parquet');
      writeHubParquet(file, c.parquet, rows);

      const fromJson = await loadDataset(c.format, jsonFile);
      const fromParquet = await loadDataset(c.format, file);
      expect(fromJson.problems.length).toBeGreaterThan(0);
      expect(fromParquet.problems).toEqual(fromJson.problems);
      expect(fromParquet.errors.map(what)).toEqual(fromJson.errors.map(what));
      for (const e of fromParquet.errors) expect(e).toMatchObject({ file, row: e.index });
    });
  }

  it('codecontests: nested tests and solutions, int64 limits and enums come through as the loader reads them', async () => {
    fresh();
    const file = join(dir, 'test-00000-of-00001.parquet');
    writeHubParquet(file, 'codecontests', fixtureRows('codecontests.jsonl'), { item: 'item' });
    // The file really holds the nested layout: a struct of two lists of strings.
    const names = parquetMetadata(new Uint8Array(readFileSync(file)).buffer).schema.map((s) => s.name);
    expect(names.slice(0, 9)).toEqual(['schema', 'name', 'description', 'public_tests', 'input', 'list', 'item', 'output', 'list']);
    const { problems } = await loadDataset('codecontests', file);
    const a = problems.find((p) => p.id === 'codecontests/9001_A. Sum of a List')!;
    expect(a.tests.public).toEqual([{ style: 'stdio', input: '3\n1 2 3\n', output: '6\n' }]);
    expect(a.tests.private).toHaveLength(2);
    expect(a.tests.generated).toEqual([{ style: 'stdio', input: '4\n1 1 1 1\n', output: '4\n' }]);
    // language 3 (PYTHON3) kept, 2 (C++) and 1 (Python 2) left out, from a list<int64>.
    expect(a.solutions).toEqual(['n = int(input())\nprint(sum(map(int, input().split())))\n']);
    expect(a.limits).toEqual({ timeSeconds: 1.5, memoryMb: 256 });
    expect(a.difficulty).toBe('A');
    expect(a.tags).toEqual(['math', 'implementation', 'platform:codeforces', 'rating:800']);
  });

  for (const codec of ['SNAPPY', 'GZIP', 'ZSTD', 'UNCOMPRESSED'] as Codec[]) {
    it(`reads ${codec} pages`, async () => {
      fresh();
      const file = join(dir, `cc-${codec}.parquet`);
      writeHubParquet(file, 'codecontests', fixtureRows('codecontests.jsonl'), { codec });
      const codecs = parquetMetadata(new Uint8Array(readFileSync(file)).buffer).row_groups.flatMap((g) => g.columns.map((col) => col.meta_data!.codec));
      expect(new Set(codecs)).toEqual(new Set([codec]));
      const { problems } = await loadDataset('codecontests', file);
      expect(problems.map((p) => p.id)).toEqual(['codecontests/9001_A. Sum of a List', 'codecontests/9001_B. Largest']);
    });
  }

  it('the hand-written zstd frame is one a zstd decoder reads back', () => {
    const data = new Uint8Array(200_000).map((_, i) => (i * 7) % 251);
    expect(compressors.ZSTD!(zstdStoredFrame(data), data.length)).toEqual(data);
  });

  it('shards of one split are one table: a folder or files in order, rows counted across them, errors naming file and row', async () => {
    fresh();
    const rows = fixtureRows('taco.jsonl');
    const jsonFile = join(dir, 'taco.jsonl');
    writeFileSync(jsonFile, rows.map((r) => JSON.stringify(r)).join('\n'));
    const split = join(dir, 'data');
    mkdirSync(split);
    const shards = [join(split, 'train-00000-of-00002.parquet'), join(split, 'train-00001-of-00002.parquet')];
    // Written last shard first: the folder is read in name order, not the order files were made.
    // Row groups of two rows: the second shard holds rows 3 to 5 in groups [3, 4], [5].
    writeHubParquet(shards[1]!, 'taco', rows.slice(3), { rowGroupSize: 2 });
    writeHubParquet(shards[0]!, 'taco', rows.slice(0, 3), { rowGroupSize: 2 });
    // TACO's special-judge list is keyed by the row's index in the whole split.
    const options = { specialJudge: new Map([[5, { specialJudge: true, case: 2 }]]) };

    const fromJson = await loadDataset('taco', jsonFile, options);
    expect(fromJson.errors.map(what)).toEqual([{ index: 2, id: '2', reason: expect.stringMatching(/^input_output is not valid JSON/) }]);
    for (const source of [shards, split]) {
      const r = await loadDataset('taco', source, options);
      expect(r.problems).toEqual(fromJson.problems);
      expect(r.problems.find((p) => p.id === 'taco/5')!.comparison).toBe('checker');
      expect(r.errors.map(describeRowError)).toEqual([`row 2 (${shards[0]} row 2, id 2): ${fromJson.errors[0]!.reason}`]);
    }
    // Rows of the second shard: their index runs on from the first, their row restarts.
    writeHubParquet(shards[1]!, 'taco', [{ question: 'no tests', input_output: '' }, ...rows.slice(3)]);
    const r = await loadDataset('taco', split);
    const lines = r.errors.map(describeRowError);
    expect(lines).toHaveLength(2);
    expect(lines[1]!.startsWith(`row 3 (${shards[1]} row 0, id 3): `)).toBe(true);
  });

  it('a file that is not Parquet, or is cut short, is one error naming the file', async () => {
    fresh();
    const notParquet = join(dir, 'rows.parquet');
    writeFileSync(notParquet, readFileSync(join(FIX, 'apps.jsonl')));
    await expect(loadDataset('apps', notParquet)).rejects.toThrow(
      `${notParquet} is not a Parquet file, or is cut short: parquet file invalid (footer != PAR1)`,
    );
    const whole = join(dir, 'whole.parquet');
    writeHubParquet(whole, 'apps', fixtureRows('apps.jsonl'));
    const cut = join(dir, 'cut.parquet');
    const bytes = readFileSync(whole);
    writeFileSync(cut, bytes.subarray(0, bytes.length - 20));
    await expect(loadDataset('apps', cut)).rejects.toThrow(`${cut} is not a Parquet file, or is cut short`);
    // Parquet's magic bytes make a file Parquet whatever its name, unless it is named as JSON.
    const unnamed = join(dir, 'rows.data');
    writeFileSync(unnamed, bytes);
    expect((await loadDataset('apps', unnamed)).problems.map((p) => p.id)).toEqual(['apps/9001']);
    await expect(loadDataset('apps', join(dir, 'missing.parquet'))).rejects.toThrow('dataset file not found');
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    await expect(loadDataset('codecontests', empty)).rejects.toThrow(`${empty} is a folder without .parquet files`);
  });

  it('a damaged page is one error naming the file and the rows it holds', async () => {
    fresh();
    const file = join(dir, 'damaged.parquet');
    writeHubParquet(file, 'codecontests', fixtureRows('codecontests.jsonl'), { rowGroupSize: 2 });
    const bytes = readFileSync(file);
    const meta = parquetMetadata(new Uint8Array(bytes).buffer);
    // The first page of the second row group's description column: its header overwritten.
    const chunk = meta.row_groups[1]!.columns[1]!.meta_data!;
    const at = Number(chunk.dictionary_page_offset ?? chunk.data_page_offset);
    bytes.fill(0xff, at, at + 24);
    writeFileSync(file, bytes);
    const seen: string[] = [];
    const err = await (async () => {
      try {
        const { importRows } = await import('../../src/datasets/loaders/index.js');
        for await (const item of importRows('codecontests', file)) seen.push(item.ok ? item.problem.id : `error ${item.error.index}`);
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    // The first row group was imported before the damage was met; nothing after it was.
    expect(seen).toEqual(['codecontests/9001_A. Sum of a List', 'codecontests/9001_B. Largest']);
    expect(err?.name).toBe('DatasetError');
    expect(err?.message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: cannot read rows 2 to 3 \\(row group 1\\): `));
  });

  it('values become what JSON holds: int64 as numbers (text past 2^53), timestamps as ISO text, typed lists as arrays', () => {
    expect(plainValue({ a: 5n, b: [3n, 2n], c: { d: 9007199254740993n } })).toEqual({ a: 5, b: [3, 2], c: { d: '9007199254740993' } });
    expect(plainValue(new Date(Date.UTC(2024, 2, 2)))).toBe('2024-03-02T00:00:00.000Z');
    expect(plainValue(new Float64Array([1.5, 2]))).toEqual([1.5, 2]);
    expect(plainValue(null)).toBeNull();
  });
});

describe('crucible data import of Parquet', () => {
  it('imports shards given in order, lists skipped rows by file and row, and a bad file is one line', async () => {
    fresh();
    const rows = fixtureRows('codecontests.jsonl');
    const shards = [join(dir, 'train-00000-of-00002.parquet'), join(dir, 'train-00001-of-00002.parquet')];
    writeHubParquet(shards[0]!, 'codecontests', rows.slice(0, 2));
    writeHubParquet(shards[1]!, 'codecontests', rows.slice(2));
    const out = join(dir, 'cc.jsonl');
    const r = await runMain(['data', 'import', 'codecontests', ...shards, '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`imported 2 problems (codecontests, source codecontests) into ${out}; skipped 2 rows\n`);
    expect(r.stderr).toBe(
      [
        `skipped row 2 (${shards[1]} row 0, id 9001_C. Broken): public_tests: input and output lists differ in length`,
        `skipped row 3 (${shards[1]} row 1, id 9001_D. File IO): reads input.txt instead of stdin/stdout: not supported`,
        '',
      ].join('\n'),
    );
    expect((await readProblemFile(out)).problems.map((p) => p.id)).toEqual(['codecontests/9001_A. Sum of a List', 'codecontests/9001_B. Largest']);

    const bad = join(dir, 'bad.parquet');
    writeFileSync(bad, 'not parquet at all');
    const b = await runMain(['data', 'import', 'codecontests', shards[0]!, bad, '--out', join(dir, 'never.jsonl')]);
    expect(b.code).toBe(2);
    expect(b.stderr).toBe(`crucible: ${bad} is not a Parquet file, or is cut short: parquet file invalid (footer != PAR1)\n`);
    expect(existsSync(join(dir, 'never.jsonl'))).toBe(false);
  });
});
