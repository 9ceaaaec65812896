/**
 * The sandbox's Python package has its own unit tests (src/sandbox/python/tests, stdlib
 * unittest): this runs them with Debian's interpreter, the one the fork-server runs under.
 * `-B`: no __pycache__ is written into the source tree.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const PYTHON_DIR = fileURLToPath(new URL('../../src/sandbox/python', import.meta.url));

it('the Python sandbox unit tests pass', async () => {
  const result = await new Promise<{ code: number | string | null; output: string }>((resolve) => {
    execFile(
      '/usr/bin/python3',
      ['-B', '-m', 'unittest', 'discover', '-s', 'tests', '-t', '.'],
      { cwd: PYTHON_DIR, timeout: 120_000, maxBuffer: 16 << 20, env: { ...process.env, CRUCIBLE_CG_MEMORY: '' } },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : (error.code ?? error.signal ?? 'error');
        resolve({ code, output: `${stdout}${stderr}` });
      },
    );
  });
  // On failure the assertion message carries unittest's whole report.
  expect(result.code, result.output).toBe(0);
}, 130_000);
