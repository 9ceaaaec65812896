import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type Sandbox } from '../../src/sandbox/index.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await createSandbox({ workers: 2, warn: () => undefined });
});
afterAll(async () => sandbox.close());

describe('test styles and verdicts', () => {
  it('LeetCode class Solution with a bare fn_name and typing names from the prelude', async () => {
    const program = 'class Solution:\n    def add(self, a: List[int], k: int) -> int:\n        return sum(a) + k\n';
    const r = await sandbox.run({ program, entryPoint: 'add', tests: [{ style: 'call', args: [[1, 2], 3], expected: 6 }] });
    expect(r[0]!.verdict).toBe('accepted');
    const r2 = await sandbox.run({ program, entryPoint: 'Solution.add', tests: [{ style: 'call', args: [[1], 1], expected: [2] }] });
    expect(r2[0]!.verdict).toBe('accepted');
  });

  it('HumanEval check(candidate) runs in the oracle and reports failures as wrong_answer', async () => {
    const test = 'def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(0, 0) == 0\n';
    const good = await sandbox.run({ program: 'def add(a, b):\n    return a + b\n', entryPoint: 'add', tests: [{ style: 'assert', code: test }] });
    const bad = await sandbox.run({ program: 'def add(a, b):\n    return a * b + 1\n', entryPoint: 'add', tests: [{ style: 'assert', code: test }] });
    expect([good[0]!.verdict, bad[0]!.verdict, good[0]!.assertMode]).toEqual(['accepted', 'wrong_answer', 'outside']);
  });

  it('assert bodies in the oracle: computed arguments, nested calls, expected exceptions, in-place changes', async () => {
    const program = [
      'def double(x):',
      '    if x < 0:',
      '        raise ValueError("negative")',
      '    return 2 * x',
      'def sort_in_place(a):',
      '    a.sort()',
      'def pair(x):',
      '    return (x, {x})',
    ].join('\n');
    const wrong = program.replace('return 2 * x', 'return 2 * x if x < 7 else 0');
    const tests = [
      'for i in range(10):\n    assert double(i) == 2 * i',
      'assert double(double(3)) == 12',
      'try:\n    double(-1)\n    assert False\nexcept ValueError:\n    pass',
      'a = [3, 1, 2]\nsort_in_place(a)\nassert a == [1, 2, 3]',
      'assert pair(2) == (2, {2}) and pair(2) != [2, {2}] and 2 in pair(2)[1]',
      'def check(candidate):\n    assert [candidate(i) for i in range(3)] == [0, 2, 4]\n    assert candidate(5) > candidate(4)\n',
      'double(-1)',
    ].map((code) => ({ style: 'assert' as const, code }));
    const good = await sandbox.run({ program, tests, entryPoint: 'double' });
    expect(good.map((r) => r.verdict)).toEqual(['accepted', 'accepted', 'accepted', 'accepted', 'accepted', 'accepted', 'runtime_error']);
    expect([good[6]!.exceptionType, good[6]!.message, good[6]!.phase]).toEqual(['ValueError', 'negative', 'test']);
    const bad = await sandbox.run({ program: wrong, tests: tests.slice(0, 2), entryPoint: 'double' });
    expect(bad.map((r) => r.verdict)).toEqual(['wrong_answer', 'accepted']);
  });

  it('a program whose own asserts fail is a runtime_error, not a wrong answer', async () => {
    const r = await sandbox.run({ program: 'def f(x):\n    assert x > 0\n    return x\n', tests: [{ style: 'assert', code: 'assert f(-1) == -1' }] });
    expect([r[0]!.verdict, r[0]!.exceptionType]).toEqual(['runtime_error', 'AssertionError']);
  });

  it('runtime errors carry the exception type and message', async () => {
    const r = await sandbox.run({ program: 'print(1 // int(input()))', tests: [{ style: 'stdio', input: '0', output: '0' }] });
    expect(r[0]).toMatchObject({ verdict: 'runtime_error', exceptionType: 'ZeroDivisionError' });
    expect(r[0]!.message).toMatch(/division/);
  });

  it('compile errors answer every test', async () => {
    const r = await sandbox.run({
      program: 'def f(:\n',
      entryPoint: 'f',
      tests: [
        { style: 'call', args: [1], expected: 1 },
        { style: 'call', args: [2], expected: 2 },
      ],
    });
    expect(r.map((x) => x.verdict)).toEqual(['compile_error', 'compile_error']);
  });

  it('tests without expected values report what the program produced', async () => {
    const r = await sandbox.run({ program: 'def f(x):\n    return (x, [x])\n', entryPoint: 'f', tests: [{ style: 'call', args: [3] }] });
    expect(r[0]).toMatchObject({ verdict: 'accepted', output: '[3,[3]]' });
  });

  it('stopOnFirstFailure returns results up to the first failing test', async () => {
    const tests = [1, 2, 3].map((n) => ({ style: 'stdio' as const, input: `${n}\n`, output: n === 2 ? 'x' : String(n) }));
    const r = await sandbox.run({ program: 'print(input())', tests, stopOnFirstFailure: true });
    expect(r.map((x) => x.verdict)).toEqual(['accepted', 'wrong_answer']);
  });

  it('a checker decides between several valid answers', async () => {
    const checker = 'def check(input, output, expected):\n    a, b = map(int, output.split())\n    return a + b == int(input)\n';
    const tests = [{ style: 'stdio' as const, input: '10', output: '5 5' }];
    const ok = await sandbox.run({ program: 'n = int(input())\nprint(3, n - 3)', tests, comparison: 'checker', checker });
    const wrong = await sandbox.run({ program: 'n = int(input())\nprint(3, n)', tests, comparison: 'checker', checker });
    // Output the checker cannot parse: the checker accepts the reference's own output, so the
    // failure is the program's (printing garbage is no free pass).
    const garbage = await sandbox.run({ program: 'print(1)', tests, comparison: 'checker', checker });
    expect([ok[0]!.verdict, wrong[0]!.verdict, garbage[0]!.verdict]).toEqual(['accepted', 'wrong_answer', 'wrong_answer']);
    // A checker that fails on the reference's output too cannot judge: the checker's fault.
    const bad = 'def check(input, output, expected):\n    return int(output) == 1\n';
    const faulty = await sandbox.run({ program: 'print(1)', tests, comparison: 'checker', checker: bad });
    const two = await sandbox.run({ program: 'print(2)', tests, comparison: 'checker', checker: bad });
    const raises = await sandbox.run({ program: 'print("x")', tests, comparison: 'checker', checker: bad });
    expect([faulty[0]!.verdict, two[0]!.verdict, raises[0]!.verdict]).toEqual(['accepted', 'wrong_answer', 'sandbox_error']);
    expect(raises[0]!.message).toMatch(/checker cannot judge the reference/);
  });

  it('a checker sees the whole output, past 64 KiB', async () => {
    const checker = 'def check(input, output, expected):\n    return len(output.split()) == 30000\n';
    const r = await sandbox.run({
      program: 'print(" ".join(["1234"] * 30000))',
      tests: [{ style: 'stdio', input: '', output: '' }],
      comparison: 'checker',
      checker,
    });
    expect(r[0]!.verdict).toBe('accepted');
  });

  it('large outputs are compared off the event loop and still correctly', async () => {
    const big = Array.from({ length: 300_000 }, (_, i) => String(i)).join('\n');
    const r = await sandbox.run({
      program: 'print("\\n".join(map(str, range(300000))))',
      tests: [
        { style: 'stdio', input: '', output: big },
        { style: 'stdio', input: '', output: big + ' 1' },
      ],
    });
    expect(r.map((x) => x.verdict)).toEqual(['accepted', 'wrong_answer']);
  });

  it('a sandbox fault is a sandbox_error, never another verdict', async () => {
    // An "interpreter" that reads the first request and dies: the fork-server itself fails.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-fault-'));
    const fake = path.join(dir, 'python3');
    writeFileSync(fake, '#!/bin/sh\nread line\nexit 0\n', { mode: 0o755 });
    const broken = await createSandbox({ pythonPath: fake, workers: 1, isolation: 'none', warn: () => undefined });
    try {
      const r = await broken.run({
        program: 'print(1)',
        tests: [
          { style: 'stdio', input: '', output: '1' },
          { style: 'stdio', input: '', output: '1' },
        ],
      });
      expect(r.map((x) => x.verdict)).toEqual(['sandbox_error', 'sandbox_error']);
      expect(r[0]!.message).toMatch(/fork-server exited/);
    } finally {
      await broken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('bad requests are refused with the field that is wrong', async () => {
    await expect(sandbox.run({ program: 'x', tests: [{ style: 'call', args: [1] }] })).rejects.toThrow(/entryPoint/);
    await expect(
      sandbox.run({
        program: 'x',
        tests: [
          { style: 'stdio', input: 'a', output: null },
          { style: 'call', args: [] },
        ],
        entryPoint: 'f',
      }),
    ).rejects.toThrow(/mixed styles/);
    await expect(sandbox.run({ program: 'x', tests: [], limits: { timeSeconds: -1 } })).rejects.toThrow(/timeSeconds/);
  });
});
