/**
 * Runs the crucible CLI in this process, as a user's command line would, and returns what it
 * printed on stdout with its exit code (process.exitCode is restored afterwards).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { buildProgram, main } from '../../src/cli/main.js';

const execFileAsync = promisify(execFile);

export async function runCli(args: readonly string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => ((out += chunk), true)) as typeof process.stdout.write;
  const before = process.exitCode;
  process.exitCode = 0;
  try {
    await (await buildProgram()).parseAsync(['node', 'crucible', ...args]);
    return { code: Number(process.exitCode ?? 0), out };
  } finally {
    process.stdout.write = write;
    process.exitCode = before;
  }
}

/**
 * Runs the crucible CLI in this process through its entry point `main` (exit codes and the
 * messages of known errors as a user sees them), capturing stdout and stderr. For tests of what
 * the commands print; tests of the process itself (signals, its environment) spawn bin/crucible.js.
 */
export async function runMain(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const [write, writeErr] = [process.stdout.write.bind(process.stdout), process.stderr.write.bind(process.stderr)];
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
  const before = process.exitCode;
  process.exitCode = 0;
  try {
    await main(['node', 'crucible', ...args]);
    return { code: Number(process.exitCode ?? 0), stdout, stderr };
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
    process.exitCode = before;
  }
}

/** Runs `bin/crucible.js` as its own process (what a user's shell runs) and returns its exit
 * code and output, whatever the code. */
export async function runProcess(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, ['bin/crucible.js', ...args], { maxBuffer: 1 << 24 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
