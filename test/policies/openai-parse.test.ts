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
    expect(parseProgram(text)).toEqual({
      program: 'def add(a, b):\n    return a + b\n',
      outcome: { status: 'ok', form: 'fenced', found: 1, usable: 1, detail: null },
    });
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
    expect(parseProgram('x = int(input())\nprint(x + 1)')).toEqual({
      program: 'x = int(input())\nprint(x + 1)\n',
      outcome: expect.objectContaining({ status: 'ok', form: 'bare' }),
    });
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
    expect(parsePyLiteral("[1, -2.5, 'a\\'b', \"c\\n\", True, False, None, (1, 2), {'k': [3]}, 1e3,]")).toEqual([
      1,
      -2.5,
      "a'b",
      'c\n',
      true,
      false,
      null,
      [1, 2],
      { k: [3] },
      1000,
    ]);
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
  it('call style: the asserts of the code block, each a call of the entry point with literal values', () => {
    const text = [
      'Here are tests that should break the candidate:',
      '```python',
      '# empty input',
      'assert add([], 0) == 0',
      "assert add([1, 2], 3) == (3, 'x')  # tuple",
      'add([5], 1)',
      'assert add(foo, 1) == 2',
      'assert other(1) == 2',
      'assert add(1, 2)',
      '```',
    ].join('\n');
    const r = parseTests(text, 'call', 'add');
    expect(r.tests.slice(0, 2)).toEqual([
      { ok: true, test: { style: 'call', args: [[], 0], expected: 0 } },
      { ok: true, test: { style: 'call', args: [[1, 2], 3], expected: [3, 'x'] } },
    ]);
    // A test of the release's form that crucible cannot run as a call counts (unusable); a bare
    // call is not a test, and an assert without a comparison is dropped without counting.
    expect(r.tests[2]).toMatchObject({ ok: false, reason: expect.stringContaining('not a literal') });
    expect(r.tests[3]).toMatchObject({ ok: false, reason: 'no call of add' });
    expect(r.tests).toHaveLength(4);
    expect(r.outcome).toMatchObject({ status: 'partial', form: 'fenced-asserts', found: 4, usable: 2 });
    expect(r.outcome.detail).toContain('1 assert in the code block not read as tests');
  });

  it('inputs only (ACE): bare calls and asserts line by line', () => {
    const r = parseTests('```python\nadd([5], 1)\nassert add(1, 2) == 3\njunk\n```', 'call', 'add', { inputsOnly: true });
    expect(r.tests).toEqual([
      { ok: true, test: { style: 'call', args: [[5], 1] } },
      { ok: true, test: { style: 'call', args: [1, 2], expected: 3 } },
    ]);
  });

  it('call style: a class method entry point is called by its method name; bad tails are named', () => {
    expect(readCallLine('assert twoSum([2, 7], 9) == [0, 1]', 'Solution.twoSum')).toEqual({
      ok: true,
      test: { style: 'call', args: [[2, 7], 9], expected: [0, 1] },
    });
    expect(readCallLine('assert twoSum([2, 7], 9) != [0, 1]', 'Solution.twoSum')).toMatchObject({
      ok: false,
      reason: expect.stringContaining('expected "== value"'),
    });
    expect(readCallLine('assert twoSum([2, 7], 9', 'Solution.twoSum')).toMatchObject({ ok: false, reason: 'unbalanced parentheses' });
  });

  it('keeps every test of the answer, however many (no cap at the suite size)', () => {
    const text = Array.from({ length: 12 }, (_, i) => `assert f(${i}) == ${i}`).join('\n');
    const r = parseTests(text, 'call', 'f');
    expect(r.tests).toHaveLength(12);
    expect(r.outcome).toMatchObject({ status: 'ok', form: 'bare-asserts', found: 12, usable: 12, detail: null });
  });

  it("assert style: the tests of the release's form, as statements; other asserts dropped in a block, counted outside", () => {
    const fenced = parseTests(
      '```python\nassert is_even(2)\nassert not is_even(3)\nprint(1)\nassert True\nassert is_even(4) == True\n```',
      'assert',
      'is_even',
    );
    expect(fenced.tests).toEqual([{ ok: true, test: { style: 'assert', code: 'assert is_even(4) == True' } }]);
    expect(fenced.outcome).toMatchObject({ status: 'ok', found: 1, usable: 1 });
    const bare = parseTests('assert is_even(2)\nassert is_even(4) == True', 'assert', 'is_even');
    expect(bare.tests).toEqual([
      { ok: false, reason: 'the assert does not compare a call with an expected value', text: 'assert is_even(2)' },
      { ok: true, test: { style: 'assert', code: 'assert is_even(4) == True' } },
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
    expect(parseTests(text, 'stdio', undefined)).toEqual({
      tests: [
        { ok: true, test: { style: 'stdio', input: '3\n1 2 3\n', output: '6\n' } },
        { ok: true, test: { style: 'stdio', input: '0\n', output: null } },
        { ok: true, test: { style: 'stdio', input: '1\n5\n', output: '5\n' } },
      ],
      outcome: { status: 'ok', form: 'io-blocks', found: 3, usable: 3, detail: null },
    });
  });

  it('stdio style: a block cut off and an output with no input are unusable', () => {
    const r = parseTests('Output:\n```\n4\n```\nInput:\n```\n1 2\n```\nInput:\n```\n9 9', 'stdio', undefined);
    expect(r.tests).toEqual([
      { ok: false, reason: 'an output block with no input block before it', text: '4' },
      { ok: true, test: { style: 'stdio', input: '1 2\n', output: null } },
      { ok: false, reason: 'the input block is not closed (the answer was cut off)', text: '9 9' },
    ]);
    expect(r.outcome.status).toBe('partial');
  });

  it('no test at all, and bytes of noise, are invalid outcomes, not errors', () => {
    expect(parseTests('I cannot help with that.', 'call', 'f').outcome).toEqual({
      status: 'invalid',
      form: 'none',
      found: 0,
      usable: 0,
      detail: 'no test found',
    });
    expect(parseTests('\u0000\u0007}{\u00ff```', 'stdio', undefined).outcome.status).toBe('invalid');
    expect(parseTests('assert f(1) == 1', 'call', undefined).outcome).toMatchObject({ status: 'invalid', detail: 'the problem names no entry point to call' });
  });
});
