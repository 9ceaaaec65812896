import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { correctedStatement, normalizeTestKey, parseAssertCall } from '../../src/rewards/test-key.js';
import { DATASETS, HAVE_DATASETS } from '../support/datasets.js';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const datasets = DATASETS;

describe('normalizeTestKey', () => {
  it('drops insignificant whitespace and comments, keeps string literals verbatim', () => {
    expect(normalizeTestKey('assert f(1, 2)==[1,2]  # a comment')).toBe('assert f(1,2)==[1,2]');
    expect(normalizeTestKey('assert  f(1,2) == [1, 2]')).toBe('assert f(1,2)==[1,2]');
    expect(normalizeTestKey("assert f('a  b') == 'a  # b'")).toBe("assert f('a  b')=='a  # b'");
    expect(normalizeTestKey('assert f("x\\"  y") == 1')).toBe('assert f("x\\"  y")==1');
    expect(normalizeTestKey('assert not f(x)')).toBe('assert not f(x)');
    expect(normalizeTestKey('assert f(x) == (1 if c else 2)')).toBe('assert f(x)==(1 if c else 2)');
    expect(normalizeTestKey('assert f(\n  1,\n  2) == \\\n 3')).toBe('assert f(1,2)==3');
    expect(normalizeTestKey('assert f("""a\n  b""") == 1')).toBe('assert f("""a\n  b""")==1');
  });
});

describe('parseAssertCall', () => {
  it('accepts assert <call> == <expr>', () => {
    expect(parseAssertCall('assert add(1, 2) == 3')).toEqual({ call: 'add(1,2)', expected: '3' });
    expect(parseAssertCall('assert Solution().twoSum([2, 7], 9) == [0, 1]')).toEqual({ call: 'Solution().twoSum([2,7],9)', expected: '[0,1]' });
    expect(parseAssertCall('assert m.f(x=1) == {"a": 1}, "message"')).toEqual({ call: 'm.f(x=1)', expected: '{"a":1}' });
    expect(parseAssertCall('assert (f(1) == 2)')).toEqual({ call: 'f(1)', expected: '2' });
    expect(parseAssertCall('assert f("==") == "a, b"')).toEqual({ call: 'f("==")', expected: '"a, b"' });
    expect(parseAssertCall('assert f(a < b) == (x <= y)')).toEqual({ call: 'f(a<b)', expected: '(x<=y)' });
  });

  it('rejects anything else', () => {
    for (const bad of [
      'add(1, 2) == 3',
      'assert add(1, 2)',
      'assert add(1, 2) != 3',
      'assert add(1, 2) < 3',
      'assert add(1, 2) is None',
      'assert f(x)[0] == 1',
      'assert -f(x) == 1',
      'assert not f(x) == 1',
      'assert f(x) + 1 == 2',
      'assert 3 == f(x)',
      'assert f(x) == 1 or True',
      'assert f(x) == 1 if c else 2',
      'assert f(x) == 1; import os',
      'assert f(x == 1',
      'assert f(x) ==',
      'assertf(x) == 1',
    ]) {
      expect(parseAssertCall(bad), bad).toBeNull();
    }
  });

  it.skipIf(!HAVE_DATASETS)('reads every model-written test of the EvolveCoder prototype records', () => {
    const file = path.join(datasets, 'evolvecoder_prototype_round0', 'step2.2_eval_gpt_4.1_mini_seed42_round0.jsonl');
    const lines = readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
    let total = 0;
    let parsed = 0;
    for (const line of lines) {
      const rec = JSON.parse(line) as { synthesis_result: { tests: string[] } };
      for (const t of rec.synthesis_result.tests) {
        total++;
        const r = parseAssertCall(t);
        if (r !== null) {
          parsed++;
          // The call is a prefix of the normalized statement, after `assert `.
          expect(normalizeTestKey(t).startsWith(`assert ${r.call}==`)).toBe(true);
        }
      }
    }
    expect(total).toBe(80);
    // These are all `assert f(...) == ...` one-liners.
    expect(parsed).toBe(total);
  });

  it('builds the GT-corrected statement', () => {
    expect(correctedStatement('f(1,2)', "'ab'")).toBe("assert f(1,2)=='ab'");
  });
});
