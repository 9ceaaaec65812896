/**
 * AST mutants of a reference program (mutate.py). The script parses and rewrites the trusted
 * reference; it never runs a program, so it needs no sandbox.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const MUTATE = fileURLToPath(new URL('./mutate.py', import.meta.url));
const MutateReply = z.object({
  reference: z.string(),
  mutants: z.array(z.object({ op: z.string(), source: z.string() })),
});
export type Mutant = z.infer<typeof MutateReply>['mutants'][number];

/** Debian's python3 by default; override with CRUCIBLE_PYTHON. */
export function defaultPython(): string {
  return process.env.CRUCIBLE_PYTHON ?? '/usr/bin/python3';
}

export function mutantsOf(program: string, python = defaultPython()): Promise<Mutant[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-I', MUTATE], { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new Error(`cannot start ${python}: ${e.message}`)));
    child.on('close', (code) => {
      if (code !== 0) {
        reject(new Error(`mutate.py (${python}) exited ${code}: ${Buffer.concat(err).toString().slice(-500)}`));
        return;
      }
      try {
        resolve(MutateReply.parse(JSON.parse(Buffer.concat(out).toString())).mutants);
      } catch (e) {
        reject(new Error(`mutate.py gave an unreadable reply: ${(e as Error).message}`));
      }
    });
    child.stdin.end(JSON.stringify({ program }));
  });
}
