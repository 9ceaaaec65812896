/**
 * Reading model output: a corpus of answers as models write them (prose around code, several
 * blocks, no block, a block cut off, tests with and without expected values, junk). Each gives
 * a recorded outcome; none throws.
 */
import { describe, expect, it } from 'vitest';
import { fencedBlocks, parseProgram, parseTests, readCallLine } from '../../src/policies/openai/parse.js';
import { parsePyArgs, parsePyLiteral, PyLiteralError } from '../../src/policies/openai/py-literal.js';

describe('parseProgram', () => {
  it('takes the code out of prose around one fenced block', () => {
    const text = 'Sure! Here is a solution:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nThis runs in O(1).';
    expect(parseProgram(text)).toEqual({ program: 'def add(a, b):\n    return a + b\n', outcome: { status: 'ok', form: 'fenced', found: 1, usable: 1, detail: null } });
  });

  it('takes the last block when there are several, and says so', () => {
    const text = 'First try:\n```py\ndef f(x): return x\n```\nBetter:\n```python\ndef f(x):\n    return x * 2\n```';
    const r = parseProgram(text);
    expect(r.program).toBe('def f(x):\n    return x * 2\n');
    expect(r.outcome).toMatchObject({ status: 'ok', form: 'several-fenced', found: 2 });
  });

  it('a block cut off by the token limit is invalid, with what was there kept', () => {
    const r = parseProgram('```python\ndef f(x):\n    return sum(ran');
    expect(r.outcome).toMatchObject({ status: 'invalid', form: 'truncated', usable: 0 });
    expect(r.program).toBe('def f(x):\n    return sum(ran');
  });

  it('no fence: the whole answer is the program (the sandbox judges it); empty is invalid', () => {
    expect(parseProgram('x = int(input())\nprint(x + 1)')).toEqual({ program: 'x = int(input())\nprint(x + 1)\n', outcome: expect.objectContaining({ status: 'ok', form: 'bare' }) });
    expect(parseProgram('  \n').outcome).toMatchObject({ status: 'invalid', form: 'empty' });
  });

  it('blocks in other languages only are invalid and named', () => {
    const r = parseProgram('```cpp\nint main(){}\n```');
    expect(r.outcome).toMatchObject({ status: 'invalid', detail: expect.stringContaining('cpp') });
  });

  it('fences: tilde fences, info strings, an unclosed last block', () => {
    const f = fencedBlocks('Input:\n~~~\n3\n~~~\n```text\nx\n');
    expect(f).toEqual([
      { info: '', body: '3', label: 'Input:', closed: true },
      { info: 'text', body: 'x\n', label: 'Input:', closed: false },
    ]);
  });
});

describe('python literals', () => {
  it('reads numbers, strings, constants, lists, tuples and dicts into JSON values', () => {
    expect(parsePyLiteral("[1, -2.5, 'a\\'b', \"c\\n\", True, False, None, (1, 2), {'k': [3]}, 1e3,]")).toEqual([1, -2.5, "a'b", 'c\n', true, false, null, [1, 2], { k: [3] }, 1000]);
    expect(parsePyArgs('(3, [4, 5])')).toEqual([3, [4, 5]]);
    expect(parsePyArgs('()')).toEqual([]);
  });

  it('refuses what is not a literal, saying where', () => {
    expect(() => parsePyLiteral('[1, x]')).toThrow(PyLiteralError);
    expect(() => parsePyLiteral('[1, x]')).toThrow(/offset 4/);
    expect(() => parsePyLiteral("{1: 'a'}")).toThrow(/key is not a string/);
    expect(() => parsePyLiteral("'abc")).toThrow(/unterminated/);
    expect(() => parsePyLiteral('1 + 2')).toThrow(/after the value/);
  });
});

describe('parseTests', () => {
  it('call style: assert lines with expected values, bare calls without, junk lines unusable', () => {
    const text = [
      'Here are tests that should break the candidate:',
      '```python',
      '# empty input',
      'assert add([], 0) == 0',
      "assert add([1, 2], 3) == (3, 'x')  # tuple",
      'add([5], 1)',
      'assert add(foo, 1) == 2',
      'assert other(1) == 2',
      '```',
    ].join('\n');
    const r = parseTests(text, 'call', 'add', 8);
    expect(r.tests.slice(0, 3)).toEqual([
      { ok: true, test: { style: 'call', args: [[], 0], expected: 0 } },
      { ok: true, test: { style: 'call', args: [[1, 2], 3], expected: [3, 'x'] } },
      { ok: true, test: { style: 'call', args: [[5], 1] } },
    ]);
    expect(r.tests[3]).toMatchObject({ ok: false, reason: expect.stringContaining('not a literal') });
    expect(r.tests[4]).toMatchObject({ ok: false, reason: 'no call of add' });
    expect(r.outcome).toMatchObject({ status: 'partial', form: 'call-lines', found: 5, usable: 3 });
  });

  it('call style: a class method entry point is called by its method name; bad tails are named', () => {
    expect(readCallLine('assert twoSum([2, 7], 9) == [0, 1]', 'Solution.twoSum')).toEqual({ ok: true, test: { style: 'call', args: [[2, 7], 9], expected: [0, 1] } });
    expect(readCallLine('assert twoSum([2, 7], 9) != [0, 1]', 'Solution.twoSum')).toMatchObject({ ok: false, reason: expect.stringContaining('expected "== value"') });
    expect(readCallLine('assert twoSum([2, 7], 9', 'Solution.twoSum')).toMatchObject({ ok: false, reason: 'unbalanced parentheses' });
  });

  it('keeps at most the suite size and records how many were dropped', () => {
    const text = Array.from({ length: 5 }, (_, i) => `assert f(${i}) == ${i}`).join('\n');
    const r = parseTests(text, 'call', 'f', 3);
    expect(r.tests).toHaveLength(3);
    expect(r.outcome).toMatchObject({ status: 'ok', found: 5, usable: 3, detail: '2 beyond the suite size 3 dropped' });
  });

  it('assert style: assert lines that call the entry point', () => {
    const r = parseTests('```python\nassert is_even(2)\nassert not is_even(3)\nprint(1)\nassert True\n```', 'assert', 'is_even', 8);
    expect(r.tests).toEqual([
      { ok: true, test: { style: 'assert', code: 'assert is_even(2)' } },
      { ok: true, test: { style: 'assert', code: 'assert not is_even(3)' } },
      { ok: false, reason: 'the assert does not call is_even', text: 'assert True' },
    ]);
  });

  it('stdio style: input blocks with and without an output block, labels by line or tag', () => {
    const text = [
      'Test 1',
      'Input:',
      '```',
      '3',
      '1 2 3',
      '```',
      'Output:',
      '```',
      '6',
      '```',
      '```input',
      '0',
      '```',
      '### Input',
      '```',
      '1',
      '5',
      '```',
      '### Expected output',
      '```',
      '5',
      '```',
    ].join('\n');
    expect(parseTests(text, 'stdio', undefined, 8)).toEqual({
      tests: [
        { ok: true, test: { style: 'stdio', input: '3\n1 2 3\n', output: '6\n' } },
        { ok: true, test: { style: 'stdio', input: '0\n', output: null } },
        { ok: true, test: { style: 'stdio', input: '1\n5\n', output: '5\n' } },
      ],
      outcome: { status: 'ok', form: 'io-blocks', found: 3, usable: 3, detail: null },
    });
  });

  it('stdio style: a block cut off and an output with no input are unusable', () => {
    const r = parseTests('Output:\n```\n4\n```\nInput:\n```\n1 2\n```\nInput:\n```\n9 9', 'stdio', undefined, 8);
    expect(r.tests).toEqual([
      { ok: false, reason: 'an output block with no input block before it', text: '4' },
      { ok: true, test: { style: 'stdio', input: '1 2\n', output: null } },
      { ok: false, reason: 'the input block is not closed (the answer was cut off)', text: '9 9' },
    ]);
    expect(r.outcome.status).toBe('partial');
  });

  it('no test at all, and bytes of noise, are invalid outcomes, not errors', () => {
    expect(parseTests('I cannot help with that.', 'call', 'f', 8).outcome).toEqual({ status: 'invalid', form: 'none', found: 0, usable: 0, detail: 'no test found' });
    expect(parseTests('\u0000\u0007}{\u00ff```', 'stdio', undefined, 8).outcome.status).toBe('invalid');
    expect(parseTests('assert f(1) == 1', 'call', undefined, 8).outcome).toMatchObject({ status: 'invalid', detail: 'the problem names no entry point to call' });
  });
});
