/**
 * Batches go to the bridge by reference: a JSONL file and the sha256 of its bytes, which the
 * bridge verifies before training on it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

const Text = z.object({ prompt: z.string().min(1), completion: z.string().min(1), eos: z.boolean().optional() });
const Ids = z.object({ prompt_ids: z.array(z.number().int().nonnegative()).min(1), completion_ids: z.array(z.number().int().nonnegative()).min(1) });
/** The prompt as text (the bridge tokenizes it as the server did) and the completion as the
 * token ids sampled: a sampled completion trains exactly what was drawn. */
const TextPromptIds = z.object({ prompt: z.string().min(1), completion_ids: z.array(z.number().int().nonnegative()).min(1) });
const Source = z.union([Text, Ids, TextPromptIds]);

export const GrpoRow = z.intersection(Source, z.object({ advantage: z.number().finite(), old_logprobs: z.array(z.number().finite().max(0)).optional() }));
export const KtoRow = z.intersection(Source, z.object({ label: z.boolean() }));
export const SftRow = Source;
export type GrpoRow = z.infer<typeof GrpoRow>;
export type KtoRow = z.infer<typeof KtoRow>;
export type SftRow = z.infer<typeof SftRow>;

const ROW = { grpo: GrpoRow, kto: KtoRow, sft: SftRow } as const;

export interface BatchRef {
  path: string;
  sha256: string;
}

/** Check every row, write the file atomically (tmp + rename) and return its reference. */
export async function writeBatch(file: string, algorithm: keyof typeof ROW, rows: readonly unknown[]): Promise<BatchRef> {
  if (rows.length === 0) throw new Error(`batch ${file}: no rows`);
  const schema = ROW[algorithm];
  const lines = rows.map((row, i) => {
    const r = schema.safeParse(row);
    if (!r.success) throw new Error(`batch ${file}: row ${i + 1} is not a valid ${algorithm} row: ${r.error.message}`);
    return JSON.stringify(r.data);
  });
  const data = Buffer.from(lines.join('\n') + '\n', 'utf8');
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, data);
  await rename(tmp, file);
  return { path: file, sha256: createHash('sha256').update(data).digest('hex') };
}
