/** `crucible data import|check` end to end, as a user runs them. */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readProblemFile } from '../../src/datasets/problemFile.js';
import { DATASETS, HAVE_DATASETS } from '../support/datasets.js';

const REPO = resolve(import.meta.dirname, '../..');
const FIX = join(import.meta.dirname, '../fixtures/datasets');
const SHARED = DATASETS;

function crucible(...args: string[]) {
  const r = spawnSync(process.execPath, [join(REPO, 'bin/crucible.js'), ...args], { cwd: REPO, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('crucible data', () => {
  it('import: writes the problem file, lists skipped rows with index and reason, exits 0', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'crucible-cli-')), 'cc.jsonl');
    const r = crucible('data', 'import', 'codecontests', join(FIX, 'codecontests.jsonl'), '--out', out);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`imported 2 problems (codecontests, source codecontests) into ${out}; skipped 2 rows`);
    expect(r.err).toContain('skipped row 2 (line 3, id 9001_C. Broken): public_tests: input and output lists differ in length');
    expect(r.err).toContain('skipped row 3 (line 4, id 9001_D. File IO)');
    const file = await readProblemFile(out);
    expect(file.header).toEqual({ crucible: 'problems', v: 1, source: 'codecontests', format: 'codecontests' });
    expect(file.problems).toHaveLength(2);

    const c = crucible('data', 'check', out, '--workers', '2');
    expect(c.code).toBe(1);
    expect(c.out).toContain('problems whose references fail: 1');
    expect(c.out).toContain('codecontests/9001_B. Largest solution 0: 1 failing tests (first: private test 1: wrong_answer)');
    expect(c.out).toContain('incorrect solutions that pass: 1');
  });

  it('import --oracle fills expected values; check of the result is clean and exits 0', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'crucible-cli-')), 'hep.jsonl');
    const r = crucible('data', 'import', 'humaneval-plus', join(FIX, 'humanevalplus.jsonl'), '--out', out, '--oracle', '--workers', '2');
    expect(r.code).toBe(0);
    expect(r.out).toContain('oracle filled 7 expected values, dropped 1 tests');
    expect(r.err).toContain('humaneval-plus/Fixture/0: generated test 1 dropped: reference runtime_error (ZeroDivisionError');
    const file = await readProblemFile(out);
    expect(file.header.oracle).toBe(true);
    const c = crucible('data', 'check', out, '--json', '--workers', '2');
    expect(c.code).toBe(0);
    expect(JSON.parse(c.out)).toMatchObject({ problems: 2, checked: 2, failingReferences: [], passingIncorrect: [] });
  });

  it.skipIf(!HAVE_DATASETS)('import of a file whose rows are all bad fails with one line and writes nothing', () => {
    const out = join(mkdtempSync(join(tmpdir(), 'crucible-cli-')), 'x.jsonl');
    const r = crucible('data', 'import', 'taco', join(SHARED, 'extras/taco_test_output_spj.jsonl'), '--out', out, '--quiet');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^crucible: no problem could be imported from .* as taco \(1000 rows skipped\)\n$/);
    expect(existsSync(out)).toBe(false);
  });

  it('unknown formats and missing files are one clear line', () => {
    const a = crucible('data', 'import', 'parquet', join(FIX, 'apps.jsonl'), '--out', join(tmpdir(), 'never.jsonl'));
    expect(a.code).toBe(2);
    expect(a.err).toMatch(/^crucible: unknown dataset format "parquet"; known formats: /);
    const b = crucible('data', 'check', join(FIX, 'missing.jsonl'));
    expect(b.code).toBe(2);
    expect(b.err).toMatch(/^crucible: dataset file not found: /);
  });
});
