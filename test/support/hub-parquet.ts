/**
 * Parquet files shaped like the Hugging Face Hub's shards of the code benchmarks, written from
 * rows the tests give: each dataset's columns with the Hub's Arrow types (int64 as INT64, lists
 * as 3-level LIST groups, CodeContests' tests and solutions as structs of lists), every column
 * nullable as pyarrow writes them. The rows are the tests' own, never copied public data.
 */
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { parquetWriteBuffer } from 'hyparquet-writer';

/** The writer's schema element (its own copy of hyparquet's type). */
type SchemaElement = NonNullable<Parameters<typeof parquetWriteBuffer>[0]['schema']>[number];

type Leaf = 'string' | 'int64' | 'int32' | 'double' | 'float' | 'bool';
export type HubType = Leaf | { list: HubType } | { struct: Record<string, HubType> };
export type HubSchema = Record<string, HubType>;

const strings = { list: 'string' } as const;
const tests = { struct: { input: strings, output: strings } } as const;
const solutions = { struct: { language: { list: 'int64' }, solution: strings } } as const;

/** The columns of each dataset's Hub Parquet, in the Hub's order. */
export const HUB_SCHEMAS = {
  /** deepmind/code_contests, data/{train,valid,test}-*.parquet */
  codecontests: {
    name: 'string',
    description: 'string',
    public_tests: tests,
    private_tests: tests,
    generated_tests: tests,
    source: 'int64',
    difficulty: 'int64',
    solutions,
    incorrect_solutions: solutions,
    cf_contest_id: 'int64',
    cf_index: 'string',
    cf_points: 'float',
    cf_rating: 'int64',
    cf_tags: strings,
    is_description_translated: 'bool',
    untranslated_description: 'string',
    time_limit: { struct: { seconds: 'int64', nanos: 'int64' } },
    memory_limit_bytes: 'int64',
    input_file: 'string',
    output_file: 'string',
  },
  /** BAAI/TACO: every column text (tags as Python list literals, limits as "1 seconds"). */
  taco: Object.fromEntries(
    [
      'question',
      'solutions',
      'starter_code',
      'input_output',
      'difficulty',
      'raw_tags',
      'name',
      'source',
      'tags',
      'skill_types',
      'url',
      'Expected Auxiliary Space',
      'time_limit',
      'date',
      'picture_num',
      'memory_limit',
      'Expected Time Complexity',
    ].map((c) => [c, 'string' as const]),
  ),
  /** codeparrot/apps */
  apps: {
    problem_id: 'int64',
    question: 'string',
    solutions: 'string',
    input_output: 'string',
    difficulty: 'string',
    url: 'string',
    starter_code: 'string',
  },
  /** google-research-datasets/mbpp, full/*.parquet */
  'mbpp-full': { task_id: 'int32', text: 'string', code: 'string', test_list: strings, test_setup_code: 'string', challenge_test_list: strings },
  /** google-research-datasets/mbpp, sanitized/*.parquet */
  'mbpp-sanitized': { source_file: 'string', task_id: 'int32', prompt: 'string', code: 'string', test_imports: strings, test_list: strings },
  /** livecodebench/code_generation_lite: every column text. */
  livecodebench: Object.fromEntries(
    [
      'question_title',
      'question_content',
      'platform',
      'question_id',
      'contest_id',
      'contest_date',
      'starter_code',
      'difficulty',
      'public_test_cases',
      'private_test_cases',
      'metadata',
    ].map((c) => [c, 'string' as const]),
  ),
} as const satisfies Record<string, HubSchema>;

export type HubDataset = keyof typeof HUB_SCHEMAS;

const LEAVES: Record<Leaf, Omit<SchemaElement, 'name'>> = {
  string: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
  int64: { type: 'INT64' },
  int32: { type: 'INT32' },
  double: { type: 'DOUBLE' },
  float: { type: 'FLOAT' },
  bool: { type: 'BOOLEAN' },
};

/** The flat schema elements of one column, depth first, as pyarrow writes them (`element` is
 * the list item's name since pyarrow 13; older Hub shards say `item`). */
function elements(name: string, t: HubType, item: string): SchemaElement[] {
  if (typeof t === 'string') return [{ name, repetition_type: 'OPTIONAL', ...LEAVES[t] }];
  if ('list' in t) {
    return [
      { name, repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      ...elements(item, t.list, item),
    ];
  }
  const fields = Object.entries(t.struct);
  return [{ name, repetition_type: 'OPTIONAL', num_children: fields.length }, ...fields.flatMap(([k, v]) => elements(k, v, item))];
}

/** A JSON row's value as the writer takes it for the column's type (INT64 wants bigint). */
function columnValue(t: HubType, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (t === 'int64') return BigInt(v as number);
  if (typeof t === 'string') return v;
  if ('list' in t) return (v as unknown[]).map((x) => columnValue(t.list, x));
  return Object.fromEntries(Object.entries(t.struct).map(([k, ft]) => [k, columnValue(ft, (v as Record<string, unknown>)[k])]));
}

/**
 * A zstd frame holding `data` in raw blocks: a frame any zstd decoder reads, written by hand
 * because Node 20's zlib has no zstd compressor.
 */
export function zstdStoredFrame(data: Uint8Array): Uint8Array {
  const MAX_BLOCK = 128 * 1024;
  const blocks = Math.max(1, Math.ceil(data.length / MAX_BLOCK));
  const out = new Uint8Array(9 + 3 * blocks + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, 0xfd2fb528, true);
  // Frame header: single segment, a 4-byte content size, no checksum, no dictionary.
  out[4] = 0xa0;
  view.setUint32(5, data.length, true);
  let at = 9;
  for (let b = 0; b < blocks; b++) {
    const chunk = data.subarray(b * MAX_BLOCK, Math.min(data.length, (b + 1) * MAX_BLOCK));
    // Block header: last-block bit, type 0 (raw), size.
    const header = (b === blocks - 1 ? 1 : 0) | (chunk.length << 3);
    out.set([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff], at);
    out.set(chunk, at + 3);
    at += 3 + chunk.length;
  }
  return out;
}

export type Codec = 'SNAPPY' | 'GZIP' | 'ZSTD' | 'UNCOMPRESSED';

export interface HubWriteOptions {
  /** The Hub writes snappy; the others are what other tools write. */
  codec?: Codec;
  /** Rows per row group (default: all in one). */
  rowGroupSize?: number;
  /** The list item's name: `element` (default) or `item`. */
  item?: 'element' | 'item';
}

/** Writes `rows` (JSON-shaped, as the Hub's JSON export has them) as a Parquet file with the
 * dataset's Hub columns; a column a row lacks is null there. */
export function writeHubParquet(file: string, dataset: HubDataset, rows: readonly Record<string, unknown>[], opts: HubWriteOptions = {}): void {
  const schema: HubSchema = HUB_SCHEMAS[dataset];
  const columns = Object.entries(schema);
  const buffer = parquetWriteBuffer({
    schema: [{ name: 'schema', num_children: columns.length }, ...columns.flatMap(([name, t]) => elements(name, t, opts.item ?? 'element'))],
    columnData: columns.map(([name, t]) => ({ name, data: rows.map((r) => columnValue(t, r[name])) })),
    codec: opts.codec ?? 'SNAPPY',
    compressors: { GZIP: (b: Uint8Array) => new Uint8Array(gzipSync(b)), ZSTD: zstdStoredFrame },
    ...(opts.rowGroupSize !== undefined ? { rowGroupSize: opts.rowGroupSize } : {}),
  });
  writeFileSync(file, new Uint8Array(buffer));
}
