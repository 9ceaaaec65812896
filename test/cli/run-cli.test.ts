/** `crucible run` and `crucible replay` as a user runs them: the real command, in a child process. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function crucible(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/crucible.js', ...args], { maxBuffer: 1 << 24 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const small = [
  '--set', 'rounds=2', '--set', 'dataset.limit=2', '--set', 'sampling.problemsPerRound=2', '--set', 'sampling.groupSize=4',
  '--set', 'policies.code.mutants=2', '--set', 'policies.test.candidates=12', '--set', `dir=${dir}`,
];

describe('the crucible command', () => {
  it('runs the demo config and prints one JSON row per round; replay --verify agrees', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', ...small, '--json']);
    expect(out.code).toBe(0);
    const rows = out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { runId: string; round: number; heldOutPass: number });
    expect(rows.map((r) => r.round)).toEqual([1, 2]);
    for (const r of rows) expect(r.heldOutPass).toBeGreaterThanOrEqual(0);
    const verify = await crucible(['replay', path.join(dir, rows[0]!.runId), '--verify']);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(/verified: every read model equals its replay/);
  }, 240_000);

  it('exits 2 with the key named on a bad override', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', '--set', 'sampling.groupSise=3']);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/unknown key "sampling\.groupSise"/);
  });

  it('exits 2 on a directory that is not a run', async () => {
    const out = await crucible(['replay', dir]);
    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/not a crucible run directory/);
  });
});
