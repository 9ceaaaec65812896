import { describe, expect, it } from 'vitest';
import { compareAssertValue, compareCallValue, compareText } from '../../src/sandbox/compare.js';
import { fromJson } from '../../src/sandbox/values.js';
import { parseTestsFile } from '../../src/sandbox/tests-file.js';
import { resolveLimits, DEFAULT_LIMITS } from '../../src/sandbox/limits.js';

describe('text comparison', () => {
  it('tokens ignore whitespace layout but not content', () => {
    expect(compareText('1 2\n3\n', '1\n2 3', 'tokens')).toBe(true);
    expect(compareText('1 2 3 4', '1 2 3', 'tokens')).toBe(false);
    expect(compareText('1.0', '1', 'tokens')).toBe(false);
  });
  it('exact is byte equality', () => {
    expect(compareText('1\n', '1', 'exact')).toBe(false);
    expect(compareText('1\n', '1\n', 'exact')).toBe(true);
  });
  it('float accepts numbers within tolerance only', () => {
    expect(compareText('0.3333333', '0.33333333333', 'float')).toBe(true);
    expect(compareText('0.334', '0.333', 'float')).toBe(false);
    expect(compareText('1e6', '1000000.0000001', 'float')).toBe(true);
    expect(compareText('abc', 'abd', 'float')).toBe(false);
  });
});

describe('call values (JSON expectations)', () => {
  it('tuples equal lists, and the one-element [x] wrapping is accepted', () => {
    expect(compareCallValue({ $tuple: [1, 2] }, fromJson([1, 2]), 'tokens')).toBe(true);
    expect(compareCallValue(9, fromJson([9]), 'tokens')).toBe(true);
    expect(compareCallValue(false, fromJson([false]), 'tokens')).toBe(true);
    expect(compareCallValue(8, fromJson([9]), 'tokens')).toBe(false);
  });
  it('booleans are not numbers, opaque objects equal nothing', () => {
    expect(compareCallValue(true, fromJson(1), 'tokens')).toBe(false);
    expect(compareCallValue({ $repr: '<A object>', $type: 'A' }, fromJson('<A object>'), 'tokens')).toBe(false);
  });
  it('dicts compare unordered, keys as JSON text', () => {
    expect(
      compareCallValue(
        {
          $dict: [
            [1, 'a'],
            [2, 'b'],
          ],
        },
        fromJson({ '2': 'b', '1': 'a' }),
        'tokens',
      ),
    ).toBe(true);
    expect(compareCallValue({ $dict: [['x', 1]] }, fromJson({ x: 2 }), 'tokens')).toBe(false);
  });
  it('floats are exact unless comparison is float', () => {
    expect(compareCallValue(0.1 + 0.2, fromJson(0.3), 'tokens')).toBe(false);
    expect(compareCallValue(0.1 + 0.2, fromJson(0.3), 'float')).toBe(true);
  });
  it('big integers compare exactly', () => {
    expect(compareCallValue({ $int: '123456789012345678901' }, { $int: '123456789012345678901' }, 'tokens')).toBe(true);
    expect(compareCallValue({ $int: '123456789012345678901' }, { $int: '123456789012345678902' }, 'tokens')).toBe(false);
  });
});

describe('sets and exact integers', () => {
  it('a returned set equals an expected list only in canonical sorted order', () => {
    expect(compareCallValue({ $set: [3, 1, 2] }, fromJson([1, 2, 3]), 'tokens')).toBe(true);
    expect(compareCallValue({ $set: [3, 1, 2] }, fromJson([3, 1, 2]), 'tokens')).toBe(false);
    expect(compareCallValue({ $set: ['b', 'a'] }, fromJson(['a', 'b']), 'tokens')).toBe(true);
    expect(compareCallValue({ $set: [1, 2] }, fromJson([1, 2, 2]), 'tokens')).toBe(false);
    // A list never equals an expected... set (there are none in JSON), and a list is not a set.
    expect(compareAssertValue([1, 2], { $set: [1, 2] })).toBe(false);
  });
  it('sets compare by sorting: 20,000 elements against a reversed copy', () => {
    const xs = Array.from({ length: 20_000 }, (_, i) => i);
    expect(compareAssertValue({ $set: xs }, { $set: [...xs].reverse() })).toBe(true);
    expect(compareAssertValue({ $set: xs }, { $set: [...xs.slice(1), -1] })).toBe(false);
  });
  it('test files keep integers above 2^53 exact', () => {
    const t = parseTestsFile('{"args":[9007199254740993],"expected":123456789012345678901234567890}\n', 't.jsonl').tests[0]!;
    expect(t).toEqual({ style: 'call', args: [9007199254740993n], expected: 123456789012345678901234567890n });
    if (t.style !== 'call') throw new Error('call test expected');
    expect(compareCallValue({ $int: '123456789012345678901234567890' }, fromJson(t.expected), 'tokens')).toBe(true);
    // Rounded, JSON.parse would have made these equal.
    expect(compareCallValue({ $int: '123456789012345678901234567891' }, fromJson(t.expected), 'tokens')).toBe(false);
    expect(compareCallValue({ $int: '9007199254740992' }, fromJson(t.args[0]), 'tokens')).toBe(false);
  });
});

describe('assert values (Python == semantics)', () => {
  it('a tuple is not a list, but 1 == 1.0 == True', () => {
    expect(compareAssertValue([1, 2], { $tuple: [1, 2] })).toBe(false);
    expect(compareAssertValue(1, 1.0)).toBe(true);
    expect(compareAssertValue(true, 1)).toBe(true);
    expect(compareAssertValue({ $set: [1, 2] }, { $set: [2, 1] })).toBe(true);
    expect(compareAssertValue({ $float: 'nan' }, { $float: 'nan' })).toBe(false);
  });
});

describe('TESTS.jsonl', () => {
  it('infers the style and reads each documented shape', () => {
    expect(parseTestsFile('{"input":"1\\n","output":"2"}\n\n{"input":"x"}\n', 't.jsonl').tests).toEqual([
      { style: 'stdio', input: '1\n', output: '2' },
      { style: 'stdio', input: 'x', output: null },
    ]);
    expect(parseTestsFile('{"args":[1,2],"expected":3}\n', 't.jsonl').tests).toEqual([{ style: 'call', args: [1, 2], expected: 3 }]);
    expect(parseTestsFile('{"assert":"assert f(1) == 2"}\n', 't.jsonl').style).toBe('assert');
  });
  it('names the file, line and field of bad input', () => {
    expect(() => parseTestsFile('{"input":"1"}\nnot json\n', 't.jsonl')).toThrow(/t\.jsonl:2: not valid JSON/);
    expect(() => parseTestsFile('{"input":1}\n', 't.jsonl')).toThrow(/t\.jsonl:1: stdio test: input/);
    expect(() => parseTestsFile('{"args":[1],"expectd":2}\n', 't.jsonl')).toThrow(/t\.jsonl:1: call test/);
  });
});

describe('limits', () => {
  it('merges layers and rejects bad values by name', () => {
    expect(resolveLimits(DEFAULT_LIMITS, { timeSeconds: 4 }).timeSeconds).toBe(4);
    expect(() => resolveLimits(DEFAULT_LIMITS, { memoryMb: -1 })).toThrow(/memoryMb/);
  });
});
