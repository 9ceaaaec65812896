import { Piscina } from 'piscina';
import { fileURLToPath } from 'node:url';
import { compareText } from './compare.js';
import type { ComparisonMode } from './api.js';

/** Above this many characters a comparison is moved off the event loop. */
export const OFFLOAD_CHARS = 1 << 20;

/** Compares stdio outputs; large ones on piscina threads so the event loop keeps serving
 * fork-server replies while megabytes of tokens are compared. */
export class TextComparer {
  #pool: Piscina | undefined;

  constructor(readonly threads: number) {}

  async compare(output: string, expected: string, mode: Exclude<ComparisonMode, 'checker'>): Promise<boolean> {
    if (output.length + expected.length < OFFLOAD_CHARS) return compareText(output, expected, mode);
    this.#pool ??= new Piscina({
      filename: fileURLToPath(new URL('./text-compare.worker.mjs', import.meta.url)),
      maxThreads: this.threads,
      minThreads: 0,
    });
    return (await this.#pool.run({ output, expected, mode })) as boolean;
  }

  async close(): Promise<void> {
    await this.#pool?.destroy();
    this.#pool = undefined;
  }
}
