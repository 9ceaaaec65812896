/**
 * Runs the crucible CLI in this process, as a user's command line would, and returns what it
 * printed on stdout with its exit code (process.exitCode is restored afterwards).
 */
import { buildProgram } from '../../src/cli/main.js';

export async function runCli(args: readonly string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => ((out += chunk), true)) as typeof process.stdout.write;
  const before = process.exitCode;
  process.exitCode = 0;
  try {
    await buildProgram().parseAsync(['node', 'crucible', ...args]);
    return { code: Number(process.exitCode ?? 0), out };
  } finally {
    process.stdout.write = write;
    process.exitCode = before;
  }
}
