/**
 * A dataset's call tests reach the program as Python reads their JSON: `3.0` is a float and an
 * integer past 2^53 is exact, from the dataset row through the problem record (JSON) to the
 * program in the real sandbox. (JSON.parse made `3.0` the int 3 and rounded 2^53 + 1.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testsFromInputOutput } from '../../src/datasets/loaders/inputOutput.js';
import type { TestCase } from '../../src/core/problem.js';
import type { Sandbox } from '../../src/sandbox/api.js';
import { createSandbox } from '../../src/sandbox/index.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await createSandbox({ workers: 1, warn: () => {} });
});
afterAll(async () => {
  await sandbox?.close();
});

/** The tests as a problem record keeps them: through JSON and back. */
const stored = (tests: TestCase[]): TestCase[] => JSON.parse(JSON.stringify(tests)) as TestCase[];

describe('call tests from input_output keep Python numbers', () => {
  // As a dataset file writes it (JSON.stringify would write 3.0 as 3).
  const row = '{"inputs": [[3.0, 4, 7], [1e2, 0]], "outputs": [[["float", 4.0]], [["float", 101.0]]], "fn_name": "kind"}';

  it('the loader keeps a whole float and a big integer as the codec writes them', () => {
    const text = '{"inputs": [[3.0, 4, 7], [9007199254740993]], "outputs": [[1], [2]], "fn_name": "f"}';
    const { tests } = testsFromInputOutput(text, undefined, 'row');
    expect(stored(tests).map((t) => (t.style === 'call' ? t.args : null))).toEqual([[{ $float: '3.0' }, 4, 7], [{ $int: '9007199254740993' }]]);
  });

  it('a program sees a float where the dataset wrote 3.0', async () => {
    const { entryPoint, tests } = testsFromInputOutput(row, undefined, 'row');
    const program = 'def kind(x, *rest):\n    return [type(x).__name__, x + 1]\n';
    const results = await sandbox.run({ program, entryPoint, tests: stored(tests) });
    expect(results.map((r) => r.verdict)).toEqual(['accepted', 'accepted']);
  });

  it('a program sees 2^53 + 1 exactly, and its exact successor is expected', async () => {
    const text = '{"inputs": [[9007199254740993]], "outputs": [[9007199254740994]], "fn_name": "inc"}';
    const { entryPoint, tests } = testsFromInputOutput(text, undefined, 'row');
    const results = await sandbox.run({ program: 'def inc(n):\n    return n + 1\n', entryPoint, tests: stored(tests) });
    expect(results.map((r) => r.verdict)).toEqual(['accepted']);
  });
});

describe('a design choice of the value grammar', () => {
  it('a JSON object whose only key is $int is that integer, not a dict', async () => {
    const text = '{"inputs": [[{"$int": "12345678901234567890"}]], "outputs": [["int"]], "fn_name": "kind"}';
    const { entryPoint, tests } = testsFromInputOutput(text, undefined, 'row');
    const results = await sandbox.run({ program: 'def kind(x):\n    return type(x).__name__\n', entryPoint, tests: stored(tests) });
    expect(results.map((r) => r.verdict)).toEqual(['accepted']);
  });
});

describe('malformed input_output', () => {
  it('is the row rejected with what is wrong and where, nothing run', () => {
    expect(() => testsFromInputOutput('{"inputs": [[3.0, 4]], "outputs": [1], "fn_name": "f"', undefined, 'apps/0042')).toThrow(
      /input_output is not valid JSON: .*at position \d+/,
    );
    expect(() => testsFromInputOutput('{"inputs": [[1.5e]], "outputs": [1], "fn_name": "f"}', undefined, 'apps/0042')).toThrow(
      /input_output is not valid JSON/,
    );
  });
});
