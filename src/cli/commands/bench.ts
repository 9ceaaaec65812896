import path from 'node:path';
import type { Command } from 'commander';
import { UserError } from '../errors.js';

/** Each benchmark is a module `bench/<name>.ts` exporting `runBench(args: string[])`. */
const BENCHES = [
  'log',
  'exec',
  'orchestration',
  'restart',
  'bridge',
  'ablate',
  'openai',
  'scale',
  'nats-auth',
  'workers',
  'neural',
  'fold',
  'warm-start',
  'startup',
  'recovery',
  'cluster',
  'chaos',
] as const;

/** `.ts` in the sources, `.js` in the compiled output (dist/bench/ beside dist/src/). */
const MODULE_EXT = path.extname(new URL(import.meta.url).pathname);

export function registerBench(program: Command): void {
  program
    .command('bench')
    .description(`run a benchmark and print its figures (${BENCHES.join(', ')})`)
    .argument('<name>', 'which benchmark')
    .argument('[args...]', 'arguments passed to the benchmark')
    .allowUnknownOption()
    .action(async (name: string, args: string[]) => {
      if (!(BENCHES as readonly string[]).includes(name)) {
        throw new UserError(`unknown benchmark "${name}"; known: ${BENCHES.join(', ')}`);
      }
      const file = new URL(`../../../bench/${name}${MODULE_EXT}`, import.meta.url);
      const mod = (await import(file.href)) as { runBench(args: string[]): Promise<void> };
      await mod.runBench(args);
    });
}
