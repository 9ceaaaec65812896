import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadDataset } from '../../src/datasets/loaders/index.js';
import { ProblemFileWriter, readProblemFile, writeProblemFile } from '../../src/datasets/problemFile.js';
import { loadProblemSource } from '../../src/datasets/source.js';
import { DATASETS, HAVE_DATASETS } from '../support/datasets.js';

const SHARED = DATASETS;
const FIX = join(import.meta.dirname, '../fixtures/datasets');
const tmp = () => mkdtempSync(join(tmpdir(), 'crucible-pf-'));

describe('problem files', () => {
  it.skipIf(!HAVE_DATASETS)('round-trips problems with a header line', async () => {
    const { problems } = await loadDataset('apps', join(SHARED, 'apps_sample'));
    const file = join(tmp(), 'apps.jsonl');
    expect(await writeProblemFile(file, { crucible: 'problems', v: 1, source: 'apps', format: 'apps' }, problems)).toBe(2);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(JSON.parse(lines[0]!)).toEqual({ crucible: 'problems', v: 1, source: 'apps', format: 'apps' });
    const back = await readProblemFile(file);
    expect(back.errors).toEqual([]);
    expect(back.problems).toEqual(problems);
  });

  it('reports bad lines with their line numbers and keeps the good ones', async () => {
    const { problems } = await loadDataset('cure', join(FIX, 'cure.json'));
    const file = join(tmp(), 'p.jsonl');
    const good = JSON.stringify(problems[0]);
    const noTests = JSON.stringify({ ...problems[1], tests: undefined });
    writeFileSync(file, ['{"crucible":"problems","v":1,"source":"cure"}', good, '{oops', noTests, good, ''].join('\n'));
    const back = await readProblemFile(file);
    expect(back.problems).toHaveLength(1);
    expect(back.errors).toEqual([
      { line: 3, reason: expect.stringMatching(/^line 3 is not valid JSON/) },
      { line: 4, reason: 'tests: Invalid input: expected object, received undefined' },
      { line: 5, reason: 'duplicate id cure/0 (first on line 2)' },
    ]);
  });

  it('refuses a file without the header', async () => {
    const file = join(tmp(), 'raw.jsonl');
    writeFileSync(file, '{"id":"x"}\n');
    await expect(readProblemFile(file)).rejects.toThrow(/raw.jsonl:1: not a crucible problem file/);
  });

  it('an aborted write leaves no file behind', async () => {
    const file = join(tmp(), 'out.jsonl');
    const w = await ProblemFileWriter.open(file, { crucible: 'problems', v: 1, source: 's' });
    await w.abort();
    expect(existsSync(file)).toBe(false);
    expect(existsSync(w.tmp)).toBe(false);
  });
});

describe('loadProblemSource', () => {
  it('loads dataset formats by path, and problem files', async () => {
    const ds = await loadProblemSource({ format: 'evolvecoder', path: join(FIX, 'evolvecoder22k.jsonl') });
    expect(ds.problems).toHaveLength(2);
    expect(ds.errors).toHaveLength(2);
    const file = join(tmp(), 'ev.jsonl');
    await writeProblemFile(file, { crucible: 'problems', v: 1, source: 'evolvecoder' }, ds.problems);
    const pf = await loadProblemSource({ format: 'problems', path: file });
    expect(pf).toEqual({ problems: ds.problems, errors: [] });
  });

  it('loads the demo set, and says when a path is missing', async () => {
    const demo = await loadProblemSource({ format: 'demo' });
    expect(demo.problems.length).toBeGreaterThan(0);
    expect(demo.errors).toEqual([]);
    await expect(loadProblemSource({ format: 'taco', path: '' })).rejects.toThrow(/needs a path/);
  });
});
