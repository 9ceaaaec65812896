/** The shape every dataset loader has, and the row errors they report. */
import type { Limits, Problem, ProblemInput } from '../../core/problem.js';
import type { RawRecord } from '../jsonl.js';

/** A row that could not be imported: reported, skipped, never fatal to the import. */
export interface RowError {
  /** 0-based index of the row in its source (or of the problem folder, for folder layouts); the
   * rows of several files (Parquet shards) are counted as one table, in order. */
  index: number;
  /** 1-based line number, when the input is JSON lines. */
  line?: number;
  /** The file holding the row, when the source is Parquet or several files. */
  file?: string;
  /** 0-based row in that file, for Parquet input. */
  row?: number;
  /** The row's id when it could be read. */
  id?: string;
  reason: string;
}

export interface LoadResult {
  problems: Problem[];
  errors: RowError[];
}

/** Thrown by a converter for a row it cannot import; the driver turns it into a RowError. */
export class RowRejected extends Error {
  constructor(
    reason: string,
    readonly id?: string,
  ) {
    super(reason);
    this.name = 'RowRejected';
  }
}

/** TACO's output_spj.jsonl, keyed by row index: whether a row needs a special judge. */
export interface SpecialJudgeInfo {
  specialJudge: boolean;
  /** TACO's undocumented `case` number, kept as a tag. */
  case?: number;
}

export interface LoaderOptions {
  /** Source label (the id prefix); each format has a default ("humaneval", "taco"...). */
  source?: string;
  /** Limits for rows that state none. */
  defaultLimits?: Partial<Limits>;
  /** TACO: special-judge flags by row index. */
  specialJudge?: ReadonlyMap<number, SpecialJudgeInfo>;
}

export interface ConvertContext {
  index: number;
  source: string;
  limits: Limits;
  options: LoaderOptions;
}

export interface DatasetLoader {
  readonly format: string;
  readonly description: string;
  readonly defaultSource: string;
  /** Default limits of the benchmark's own harness, for rows that state none. */
  readonly defaultLimits: Limits;
  /** Where the rows come from; default: the records of a JSON / JSON lines / Parquet file or a
   * folder of Parquet shards (records.ts). */
  rows?(path: string): AsyncIterable<RawRecord>;
  /** Converts one raw row; throws RowRejected (or any error) for a row it cannot import. */
  convert(row: unknown, ctx: ConvertContext): ProblemInput;
}
