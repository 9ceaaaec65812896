/** Every way crucible starts node passes the young generation's size (src/core/node-flags.ts). */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { YOUNG_GENERATION_FLAG } from '../../src/core/node-flags.js';

const run = promisify(execFile);
const REPO = path.join(import.meta.dirname, '../..');

describe('the young generation flag', () => {
  it('is one this node takes, and it lets the young generation grow past the default', async () => {
    // Objects that live a while make V8 grow the young generation up to its bound.
    const probe = `let keep = []; for (let i = 0; i < 2e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 300000) keep = []; }
      console.log(require('node:v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size)`;
    const grown = Number((await run(process.execPath, [YOUNG_GENERATION_FLAG, '-e', probe])).stdout);
    const plain = Number((await run(process.execPath, ['-e', probe])).stdout);
    expect(plain).toBeLessThanOrEqual(32 * 2 ** 20);
    expect(grown).toBeGreaterThan(plain * 2);
  });

  it("is on the command's first line, which starts it", async () => {
    const first = readFileSync(path.join(REPO, 'bin/crucible.js'), 'utf8').split('\n')[0];
    expect(first).toBe(`#!/usr/bin/env -S node ${YOUNG_GENERATION_FLAG}`);
    const { stdout } = await run(path.join(REPO, 'bin/crucible.js'), ['--version'], { cwd: REPO });
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('is in the npm scripts that start crucible and the worker processes a run starts', () => {
    const scripts = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const name of ['bench', 'chaos', 'crucible']) expect(scripts[name]).toContain(`node ${YOUNG_GENERATION_FLAG} bin/crucible.js`);
    const supervisor = readFileSync(path.join(REPO, 'src/workers/supervisor.ts'), 'utf8');
    expect(supervisor).toMatch(/const args = \[\s*YOUNG_GENERATION_FLAG,\s*CRUCIBLE_BIN,/);
  });
});
