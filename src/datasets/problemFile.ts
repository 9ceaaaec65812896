/**
 * The problem file `crucible data import` writes and runs read: JSON lines, a header line
 * `{"crucible":"problems","v":1,"source":...}` and then one Problem record per line. Written to a
 * temporary file and renamed, so an interrupted import never leaves a half file behind.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { z } from 'zod';
import { DatasetError } from './errors.js';
import { readJsonLines } from './jsonl.js';
import { formatIssues } from './loaders/common.js';
import { Problem } from '../core/problem.js';

export const ProblemFileHeader = z.object({
  crucible: z.literal('problems'),
  v: z.literal(1),
  source: z.string().min(1),
  /** The dataset format it was imported from. */
  format: z.string().optional(),
  /** Whether expected values of input-only tests were filled from the reference solution. */
  oracle: z.boolean().optional(),
});
export type ProblemFileHeader = z.infer<typeof ProblemFileHeader>;

export interface ProblemFileLineError {
  /** 1-based line number in the file. */
  line: number;
  reason: string;
}

export interface ProblemFile {
  header: ProblemFileHeader;
  problems: Problem[];
  /** Lines that are not valid Problem records (skipped), with their line numbers. */
  errors: ProblemFileLineError[];
}

/** Reads and validates a problem file. A bad header is fatal; a bad record line is reported. */
export async function readProblemFile(path: string): Promise<ProblemFile> {
  let header: ProblemFileHeader | undefined;
  const problems: Problem[] = [];
  const errors: ProblemFileLineError[] = [];
  const seen = new Map<string, number>();
  for await (const rec of readJsonLines(path)) {
    const line = rec.line!;
    if (!header) {
      const h = ProblemFileHeader.safeParse(rec.value);
      if (rec.error || !h.success) {
        throw new DatasetError(`${path}:${line}: not a crucible problem file (first line must be {"crucible":"problems","v":1,"source":...})`);
      }
      header = h.data;
      continue;
    }
    if (rec.error) {
      errors.push({ line, reason: rec.error });
      continue;
    }
    const p = Problem.safeParse(rec.value);
    if (!p.success) {
      errors.push({ line, reason: formatIssues(p.error) });
      continue;
    }
    const first = seen.get(p.data.id);
    if (first !== undefined) {
      errors.push({ line, reason: `duplicate id ${p.data.id} (first on line ${first})` });
      continue;
    }
    seen.set(p.data.id, line);
    problems.push(p.data);
  }
  if (!header) throw new DatasetError(`${path} is empty: not a crucible problem file`);
  return { header, problems, errors };
}

/** Streams problems into a file; `close()` publishes it, `abort()` removes the partial file. */
export class ProblemFileWriter {
  #count = 0;
  private constructor(
    readonly path: string,
    readonly tmp: string,
    private readonly out: WriteStream,
  ) {}

  static async open(path: string, header: ProblemFileHeader): Promise<ProblemFileWriter> {
    const tmp = `${path}.tmp-${process.pid}`;
    const out = createWriteStream(tmp, { flags: 'w' });
    await once(out, 'open');
    const w = new ProblemFileWriter(path, tmp, out);
    await w.#line(ProblemFileHeader.parse(header));
    return w;
  }

  get count(): number {
    return this.#count;
  }

  async write(problem: Problem): Promise<void> {
    await this.#line(problem);
    this.#count += 1;
  }

  async #line(value: unknown): Promise<void> {
    if (!this.out.write(`${JSON.stringify(value)}\n`)) await once(this.out, 'drain');
  }

  async close(): Promise<void> {
    this.out.end();
    await once(this.out, 'finish');
    await rename(this.tmp, this.path);
  }

  async abort(): Promise<void> {
    if (!this.out.destroyed) {
      // Pending writes fail once destroyed; that is the point, not an error to surface.
      this.out.on('error', () => {});
      const closed = new Promise<void>((done) => this.out.once('close', () => done()));
      this.out.destroy();
      await closed;
    }
    await rm(this.tmp, { force: true });
  }
}

export async function writeProblemFile(path: string, header: ProblemFileHeader, problems: Iterable<Problem>): Promise<number> {
  const w = await ProblemFileWriter.open(path, header);
  try {
    for (const p of problems) await w.write(p);
    await w.close();
    return w.count;
  } catch (err) {
    await w.abort();
    throw err;
  }
}
