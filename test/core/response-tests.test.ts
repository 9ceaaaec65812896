/**
 * The tests of an answer as Code-A1's release reads them (code/rl/reward.py at be86d93:
 * extract_testcase_from_response, extract_asserts, process_assert_node, and the line reading of
 * evaluate): which statements are tests, which count as malformed, and the total. Expected
 * values are worked from those rules by hand.
 */
import { describe, expect, it } from 'vitest';
import { readResponseTests } from '../../src/core/response-tests.js';
import { parseAssertCall, readAssertComparison } from '../../src/core/python-text.js';

const forms = (response: string) => readResponseTests(response).statements.map((s) => (s.form ? `${s.form.call} == ${s.form.expected}` : null));

describe('tests inside a ```python block', () => {
  it('reads every test (no cap), drops asserts that are not tests without counting them', () => {
    const answer = [
      'Tests:',
      '```python',
      ...Array.from({ length: 10 }, (_, i) => `assert f(${i}) == ${i + 1}`),
      'assert f(3)',
      'assert x == f(1)',
      'assert f(1)[0] == 1',
      'assert not f(9) == 1',
      'assert f(10) == 1 and f(11) == 2',
      'assert f(',
      'this is not code',
      '```',
      'assert f(99) == 1',
    ].join('\n');
    const r = readResponseTests(answer);
    expect(r.source).toBe('fenced');
    expect(r.statements.length).toBe(10);
    expect(r.statements.every((s) => s.form !== null)).toBe(true);
    expect(r.statements[9]!.text).toBe('assert f(9) == 10');
    // The five asserts that are not tests are dropped; `assert f(` never closes (dropped too);
    // the line after the block is not read.
    expect(r.dropped.map((d) => d.text)).toEqual([
      'assert f(3)',
      'assert x == f(1)',
      'assert f(1)[0] == 1',
      'assert not f(9) == 1',
      'assert f(10) == 1 and f(11) == 2',
    ]);
  });

  it('gathers statements by bracket balance; a new assert line restarts one left open', () => {
    const answer = [
      '```python',
      'assert f([1,',
      '   2]) == 3',
      'print("unbalanced ("',
      'assert f(4) == 5  # comment (',
      'assert f(',
      '    6,',
      ') == \\',
      '  7',
      '```',
    ].join('\n');
    expect(forms(answer)).toEqual(['f([1, 2]) == 3', 'f(4) == 5', 'f(6,) == 7']);
  });

  it('asserts inside functions are read (each line parses on its own); one-line compound statements are not', () => {
    const answer = ['```python', 'def test_f():', '    assert f(1) == 1', 'if True: assert f(2) == 2', '```'].join('\n');
    expect(forms(answer)).toEqual(['f(1) == 1']);
  });

  it("substitutes names assigned earlier into the call's bare-name arguments, not into the expected value", () => {
    const answer = [
      '```python',
      'a = 3',
      'b = (1, 2)',
      'c = 1, 2',
      'expected = 5',
      'assert f(a, b, k=c) == expected',
      'assert f(*b) == 1',
      'assert m.f(a)(a) == 2',
      'assert f(a + 1) == 3',
      '```',
    ].join('\n');
    expect(forms(answer)).toEqual(['f(3, (1, 2), k=(1, 2)) == expected', 'f(*b) == 1', 'm.f(a)(3) == 2', 'f(a + 1) == 3']);
  });

  it('several blocks are read together; a statement that does not parse drops its line', () => {
    const answer = [
      '```python',
      'assert f(1) == 2',
      '```',
      'then',
      '```python',
      'assert f(3) == 4; assert f(5) == 6',
      'assert f(1 2) == 3',
      'assert f(1) == 2 3',
      'assert f(1) == not 2',
      '```',
    ].join('\n');
    expect(forms(answer)).toEqual(['f(1) == 2', 'f(3) == 4', 'f(5) == 6']);
  });
});

describe('no closed ```python block: every line starting with `assert` counts', () => {
  it('a line that is not a test is malformed, counted in the total', () => {
    const answer = [
      'Here are tests',
      'assert f(1) == 2',
      'assert f(1)',
      'asserting that f works',
      '  assert f("a") == 1 ; x = 2',
      'assert f(1,',
      'f(2) == 3',
    ].join('\n');
    const r = readResponseTests(answer);
    expect(r.source).toBe('bare');
    expect(r.statements.map((s) => (s.form ? s.text : null))).toEqual(['assert f(1) == 2', null, null, 'assert f("a") == 1', null]);
    expect(r.statements.filter((s) => s.form === null).map((s) => s.text)).toEqual(['assert f(1)', 'asserting that f works', 'assert f(1,']);
  });

  it('a block fenced otherwise (``` or ```py) or never closed is read line by line', () => {
    expect(readResponseTests('```py\nassert f(1) == 2\nassert f(1) ==\n```').statements.map((s) => s.form !== null)).toEqual([true, false]);
    expect(readResponseTests('```python\nassert f(1) == 2').source).toBe('bare');
    expect(readResponseTests('```\nassert f(1) == 2\n```').statements.length).toBe(1);
  });
});

describe('the release reads any comparison as == (a quirk crucible does not copy)', () => {
  it('assert f(x) != y is read by the release as assert f(x) == y; crucible does not take it as a test', () => {
    // The release's process_assert_node / extract_calls_answers keep the first comparator
    // whatever the operator: `assert f(2) != 3` becomes `assert f(2) == 3`.
    expect(readAssertComparison('assert f(2) != 3')).toEqual({ call: 'f(2)', expected: '3', op: '!=', chained: false });
    expect(parseAssertCall('assert f(2) != 3')).toBeNull();
    // In a block it is dropped without counting; on a bare line it is a malformed test.
    const fenced = readResponseTests('```python\nassert f(1) == 2\nassert f(2) != 3\nassert f(7) is None\nassert f(1) == 2 == 3\n```');
    expect(fenced.statements.map((s) => s.text)).toEqual(['assert f(1) == 2']);
    expect(fenced.dropped.map((d) => d.reason)).toEqual([
      'the comparison is !=, not == (the release reads it as ==)',
      'the comparison is is, not == (the release reads it as ==)',
      'a chained comparison (the release keeps its first comparator as ==)',
    ]);
    const bare = readResponseTests('assert f(1) == 2\nassert f(2) != 3');
    expect(bare.statements.map((s) => s.form !== null)).toEqual([true, false]);
  });
});

describe('string literals', () => {
  it('an escaped backslash before the closing quote ends the literal; an escaped quote does not', () => {
    expect(parseAssertCall("assert f('a\\\\') == 'b'")).toEqual({ call: "f('a\\\\')", expected: "'b'" });
    expect(parseAssertCall("assert f('a\\') == 'b'")).toBeNull();
    expect(forms('```python\nassert f("x#y") == "(" # a comment )\n```')).toEqual(['f("x#y") == "("']);
  });
});
