import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { describeRowError, FORMATS, loadDataset, readSpecialJudge } from '../../src/datasets/loaders/index.js';
import type { Problem } from '../../src/core/problem.js';
import { DATASETS, HAVE_DATASETS } from '../support/datasets.js';

const REPO = resolve(import.meta.dirname, '../..');
const SHARED = DATASETS;
const FIX = join(import.meta.dirname, '../fixtures/datasets');
const SPJ = join(SHARED, 'extras/taco_test_output_spj.jsonl');

const byId = (ps: Problem[], id: string): Problem => {
  const p = ps.find((x) => x.id === id);
  if (!p) throw new Error(`no problem ${id} among ${ps.map((x) => x.id).join(', ')}`);
  return p;
};

describe('HumanEval (real records, .jsonl.gz)', () => {
  it.skipIf(!HAVE_DATASETS)('loads all 164 tasks as assert-style problems with check(candidate) tests', async () => {
    const { problems, errors } = await loadDataset('humaneval', join(SHARED, 'humaneval/HumanEval.jsonl.gz'));
    expect(errors).toEqual([]);
    expect(problems).toHaveLength(164);
    const p = byId(problems, 'humaneval/HumanEval/0');
    expect(p.style).toBe('assert');
    expect(p.entryPoint).toBe('has_close_elements');
    expect(p.starterCode).toBe(p.statement);
    expect(p.tests.private).toHaveLength(1);
    expect(p.tests.private[0]).toMatchObject({ style: 'assert' });
    expect((p.tests.private[0] as { code: string }).code).toContain('def check(candidate):');
    expect(p.solutions[0]).toMatch(/^from typing import List\n[\s\S]*def has_close_elements[\s\S]*return False\n$/);
    expect(new Set(problems.map((x) => x.id)).size).toBe(164);
  });
});

describe('APPS', () => {
  it.skipIf(!HAVE_DATASETS)('reads the original one-folder-per-problem layout, stdio and call-based', async () => {
    const { problems, errors } = await loadDataset('apps', join(SHARED, 'apps_sample'));
    expect(errors).toEqual([]);
    expect(problems.map((p) => p.id)).toEqual(['apps/0001', 'apps/2404']);
    const stdio = byId(problems, 'apps/0001');
    expect(stdio.style).toBe('stdio');
    expect(stdio.tests.private).toEqual([{ style: 'stdio', input: '3\n2 2 3\n4 3 7\n10 1 9\n', output: '1\n6\n-1\n' }]);
    expect(stdio.solutions).toHaveLength(24);
    expect(stdio.difficulty).toBe('interview');
    // gen_solutions.json: the 6 programs labelled result=false, deduplicated.
    expect(stdio.incorrectSolutions.length).toBeGreaterThan(0);
    expect(new Set(stdio.incorrectSolutions).size).toBe(stdio.incorrectSolutions.length);

    const call = byId(problems, 'apps/2404');
    expect(call.style).toBe('call');
    expect(call.entryPoint).toBe('Solution.findKthPositive');
    expect(call.starterCode).toContain('class Solution');
    // outputs [9]: not wrapped, so the expected value stays 9.
    expect(call.tests.private).toEqual([{ style: 'call', args: [[2, 3, 4, 7, 11], 5], expected: 9 }]);
  });

  it.skipIf(!HAVE_DATASETS)('reads a single problem folder and Hugging Face rows; a row without tests is reported', async () => {
    const one = await loadDataset('apps', join(SHARED, 'apps_sample/2404'));
    expect(one.problems.map((p) => p.id)).toEqual(['apps/2404']);
    const hf = await loadDataset('apps', join(FIX, 'apps.jsonl'));
    expect(hf.problems.map((p) => p.id)).toEqual(['apps/9001']);
    expect(hf.errors).toEqual([{ index: 1, line: 2, id: '9002', reason: 'input_output is empty: no tests' }]);
  });
});

describe('EvolveCoder', () => {
  it.skipIf(!HAVE_DATASETS)('loads the real round-0 prototype rows: 20 model-written asserts each, no reference', async () => {
    const file = join(SHARED, 'evolvecoder_prototype_round0/step2.2_eval_gpt_4.1_mini_seed42_round0.jsonl');
    const { problems, errors } = await loadDataset('evolvecoder', file);
    expect(errors).toEqual([]);
    expect(problems.map((p) => p.entryPoint)).toEqual(['max_weighted_path', 'predictNextFourFib', 'classify_sentences', 'max_processed_requests']);
    for (const p of problems) {
      expect(p.tests.generated).toHaveLength(20);
      expect(p.tests.private).toEqual([]);
      expect(p.solutions).toEqual([]);
      expect(p.statement).toMatch(/Problem|Sentence/);
    }
  });

  it('loads EvolveCoder-22K rows and reports bad ones by index', async () => {
    const { problems, errors } = await loadDataset('evolvecoder', join(FIX, 'evolvecoder22k.jsonl'));
    expect(problems.map((p) => [p.id, p.entryPoint])).toEqual([
      ['evolvecoder/TACO_901', 'count_vowels'],
      ['evolvecoder/TACO_903', 'inc'],
    ]);
    expect(errors.map(describeRowError)).toEqual([
      'row 1 (line 2, id TACO_902): tests.0 is not an assert statement',
      expect.stringMatching(/^row 2 \(line 3\): line 3 is not valid JSON/),
    ]);
  });
});

describe('TACO', () => {
  it.skipIf(!HAVE_DATASETS)('reads the real output_spj.jsonl: 218 of 1000 test problems need a special judge', async () => {
    const spj = await readSpecialJudge(SPJ);
    expect(spj.size).toBe(1000);
    expect([...spj.values()].filter((s) => s.specialJudge)).toHaveLength(218);
  });

  it.skipIf(!HAVE_DATASETS)('unwraps one-element output lists only when every output is wrapped; marks spj rows', async () => {
    const { problems, errors } = await loadDataset('taco', join(FIX, 'taco.jsonl'), {
      specialJudge: await readSpecialJudge(SPJ),
    });
    expect(errors).toEqual([{ index: 2, line: 3, reason: expect.stringMatching(/^input_output is not valid JSON/), id: '2' }]);
    const [plus, even, pair, echo, divisor] = problems;
    expect(plus).toMatchObject({ id: 'taco/0', title: 'APlusB', style: 'stdio', limits: { timeSeconds: 1, memoryMb: 256 } });
    expect(plus!.tags).toEqual(['Mathematics', 'Sorting', 'skill:Sorting', 'platform:codeforces']);
    expect(even).toMatchObject({ style: 'call', entryPoint: 'is_even', limits: { timeSeconds: 2, memoryMb: 512 } });
    expect(even!.tests.private).toEqual([
      { style: 'call', args: [2], expected: true },
      { style: 'call', args: [3], expected: false },
    ]);
    // Outputs of length 2 are return values, not wrappers.
    expect(pair!.tests.private.map((t) => (t as { expected: unknown }).expected)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(pair!.limits.timeSeconds).toBe(4); // time_limit None: the default
    expect(echo!.tests.private).toEqual([{ style: 'stdio', input: 'a\nb\n', output: 'a\nb\n' }]);
    // Row 5 is a special-judge problem in TACO's own output_spj.jsonl.
    expect(divisor).toMatchObject({ id: 'taco/5', comparison: 'checker' });
    expect(divisor!.tags).toContain('special-judge');
    expect(plus!.comparison).toBe('tokens');
  });
});

describe('CodeContests', () => {
  it('keeps Python 3 solutions only, converts limits, and reports malformed rows', async () => {
    const { problems, errors } = await loadDataset('codecontests', join(FIX, 'codecontests.jsonl'));
    expect(problems.map((p) => p.id)).toEqual(['codecontests/9001_A. Sum of a List', 'codecontests/9001_B. Largest']);
    const [a, b] = problems;
    expect(a!.solutions).toHaveLength(1);
    expect(a!.solutions[0]).toContain('print(sum(');
    expect(a!.incorrectSolutions).toHaveLength(1);
    expect(a!.limits).toEqual({ timeSeconds: 1.5, memoryMb: 256 });
    expect(a!.tests.public).toEqual([{ style: 'stdio', input: '3\n1 2 3\n', output: '6\n' }]);
    expect(a!.tests.private).toHaveLength(2);
    expect(a!.tests.generated).toHaveLength(1);
    expect(a!.difficulty).toBe('A');
    expect(a!.tags).toEqual(['math', 'implementation', 'platform:codeforces', 'rating:800']);
    expect(b!.limits.timeSeconds).toBe(2); // time_limit null: the default
    expect(errors.map((e) => [e.index, e.id])).toEqual([
      [2, '9001_C. Broken'],
      [3, '9001_D. File IO'],
    ]);
    expect(errors[0]!.reason).toBe('public_tests: input and output lists differ in length');
    expect(errors[1]!.reason).toMatch(/reads input.txt/);
  });
});

describe('LiveCodeBench', () => {
  it('decodes pickled private tests, parses functional tests per argument line, refuses evil blobs', async () => {
    const { problems, errors } = await loadDataset('livecodebench', join(FIX, 'livecodebench.jsonl'));
    expect(problems.map((p) => p.id)).toEqual(['livecodebench/abc900_a', 'livecodebench/3999', 'livecodebench/abc900_b']);
    const [stdin, fn, plain] = problems;
    expect(stdin!.style).toBe('stdio');
    expect(stdin!.tests.private).toEqual([
      { style: 'stdio', input: '2\n10 20\n', output: '30\n' },
      { style: 'stdio', input: '1\n7\n', output: '7\n' },
    ]);
    expect(plain!.tests.private).toEqual(stdin!.tests.private);
    expect(stdin!.tags).toEqual(['platform:atcoder', 'contest:contest-abc900_a', 'contest-date:2024-03-02']);
    expect(fn).toMatchObject({ style: 'call', entryPoint: 'Solution.maxPick', difficulty: 'medium' });
    expect(fn!.tests.public).toEqual([{ style: 'call', args: [[1, 2, 3], 2], expected: 5 }]);
    expect(fn!.tests.private).toEqual([
      { style: 'call', args: [[4, 4], 1], expected: 4 },
      { style: 'call', args: [[], 0], expected: 0 },
      { style: 'call', args: [['a\nb', 'c'], 1], expected: 'c' },
    ]);
    expect(errors.map((e) => [e.index, e.id])).toEqual([
      [3, 'abc900_c'],
      [4, '4000'],
    ]);
    expect(errors[0]!.reason).toMatch(/STACK_GLOBAL \(0x93\) is not allowed/);
    expect(errors[1]!.reason).toBe('functional tests but metadata has no func_name');
  });
});

describe('MBPP, HumanEval+, MBPP+, CURE', () => {
  it('MBPP: first assert public, the rest private, setup prepended, CRLF normalized', async () => {
    const { problems, errors } = await loadDataset('mbpp', join(FIX, 'mbpp.jsonl'));
    const [full, sanitized] = problems;
    expect(full).toMatchObject({ id: 'mbpp/901', entryPoint: 'double_all', style: 'assert' });
    expect(full!.solutions[0]).toBe('def double_all(xs):\n    return [2 * x for x in xs]');
    expect(full!.tests.public).toEqual([{ style: 'assert', code: 'assert double_all([1, 2]) == [2, 4]\n' }]);
    expect(full!.tests.private).toHaveLength(3); // two more + one challenge assert
    expect(sanitized).toMatchObject({ id: 'mbpp/902', entryPoint: 'hyp' });
    expect(sanitized!.tests.public[0]).toEqual({ style: 'assert', code: 'import math\nassert math.isclose(hyp(3, 4), 5.0)\n' });
    expect(errors).toEqual([{ index: 2, line: 3, id: '903', reason: 'test_list: needs at least one assert' }]);
  });

  it('HumanEval+ / MBPP+: input-only call tests, base private and plus generated', async () => {
    const he = await loadDataset('humaneval-plus', join(FIX, 'humanevalplus.jsonl'));
    const [div, rep] = he.problems;
    expect(div).toMatchObject({ id: 'humaneval-plus/Fixture/0', style: 'call', entryPoint: 'safe_div', comparison: 'float' });
    expect(div!.tests.private).toEqual([
      { style: 'call', args: [6, 3] },
      { style: 'call', args: [1, 4] },
    ]);
    expect(div!.tests.generated).toHaveLength(3);
    expect(div!.solutions[0]).toBe(`${div!.statement}    return a / b\n`);
    expect(rep!.comparison).toBe('tokens');
    expect(he.errors).toEqual([{ index: 2, line: 3, id: 'Fixture/2', reason: 'base_input: must be a list of argument lists' }]);
    const mbpp = await loadDataset('mbpp-plus', join(FIX, 'mbppplus.jsonl'));
    const [common] = mbpp.problems;
    // MBPP+ gives a whole program as the canonical solution.
    expect(common!.solutions[0]).toBe('def common(a, b):\n    return sorted(set(a) & set(b))\n');
    expect(common!.tests.generated).toEqual([
      { style: 'call', args: [[], [1]] },
      {
        style: 'call',
        args: [
          [5, 5, 6],
          [6, 5],
        ],
      },
    ]);
  });

  it('CURE: a JSON array; example tests public, test_* private, test_time_limit kept', async () => {
    const { problems, errors } = await loadDataset('cure', join(FIX, 'cure.json'));
    expect(problems.map((p) => [p.id, p.limits.timeSeconds, p.tests.public.length, p.tests.private.length])).toEqual([
      ['cure/0', 1, 1, 2],
      ['cure/2', 2, 0, 1],
    ]);
    expect(errors).toEqual([{ index: 1, id: '1', reason: '(row): example_input and example_output differ in length' }]);
  });
});

describe('the import driver', () => {
  it('knows every format of the issue', () => {
    expect([...FORMATS].sort()).toEqual(
      ['apps', 'codecontests', 'cure', 'evolvecoder', 'humaneval', 'humaneval-plus', 'livecodebench', 'mbpp', 'mbpp-plus', 'taco'].sort(),
    );
  });

  it('reports duplicate ids and rows that are not objects, and reads gzip JSON lines', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'crucible-ds-'));
    const row = { id: 'X1', question: 'q', tests: ['assert f(1) == 1'] };
    const text = [JSON.stringify(row), '', '42', JSON.stringify(row)].join('\n');
    writeFileSync(join(dir, 'rows.jsonl.gz'), gzipSync(text));
    const { problems, errors } = await loadDataset('evolvecoder', join(dir, 'rows.jsonl.gz'));
    expect(problems).toHaveLength(1);
    expect(errors.map(describeRowError)).toEqual([
      'row 1 (line 3): (row): Invalid input: expected object, received number',
      'row 2 (line 4, id evolvecoder/X1): duplicate id (first seen at row 0)',
    ]);
  });

  it('refuses an unknown format and a missing file with one clear line', async () => {
    await expect(loadDataset('parquet', join(FIX, 'apps.jsonl'))).rejects.toThrow(/unknown dataset format "parquet"; known formats: codecontests/);
    await expect(loadDataset('apps', join(FIX, 'nope.jsonl'))).rejects.toThrow(/dataset file not found/);
  });

  it('the committed fixtures are exactly what make_fixtures.py writes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'crucible-fx-'));
    execFileSync('/usr/bin/python3', [join(FIX, 'make_fixtures.py'), dir]);
    const written = readdirSync(dir).sort();
    expect(written).toContain('livecodebench.jsonl');
    for (const f of written) expect(readFileSync(join(dir, f), 'utf8'), f).toBe(readFileSync(join(FIX, f), 'utf8'));
  });
});
