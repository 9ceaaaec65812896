/**
 * The warm-start rows of served policies: the test role learns every ordering of a problem's
 * public examples (a policy trained on one fixed suite writes only it, and a group of identical
 * suites has no GRPO gradient), white-box with each known program in the prompt.
 */
import { describe, expect, it } from 'vitest';
import { sftRows, suiteSelections } from '../../src/policies/openai/sft.js';
import { templateFor } from '../../src/policies/openai/prompts.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';

describe('suiteSelections', () => {
  it('every ordered selection of up to max tests, longest first', () => {
    expect(suiteSelections(['a', 'b'], 4)).toEqual([['a', 'b'], ['b', 'a'], ['a'], ['b']]);
    expect(suiteSelections(['a', 'b', 'c'], 2)).toHaveLength(3 + 6);
    expect(suiteSelections(['a', 'b', 'c'], 8)).toHaveLength(3 + 6 + 6);
    expect(suiteSelections(['a'], 4)).toEqual([['a']]);
    expect(suiteSelections([], 4)).toEqual([]);
  });

  it('past three tests: the list in order and reversed, cut to max', () => {
    expect(suiteSelections([1, 2, 3, 4, 5], 3)).toEqual([[1, 2, 3], [5, 4, 3]]);
  });
});

describe('sftRows for the test role', () => {
  const problem = loadDemoProblems().find((p) => p.id === 'demo/word-count')!;
  const opts = { method: 'code-a1', suiteSize: 4, prompts: 'brief' as const };

  it('black-box: one prompt, each ordering of the examples as Input/Output blocks', () => {
    const rows = sftRows(problem, 'test', { ...opts, whiteBox: false });
    expect(rows).toHaveLength(4);
    expect(new Set(rows.map((r) => r.prompt)).size).toBe(1);
    expect(new Set(rows.map((r) => r.completion)).size).toBe(4);
    expect(rows[0]!.completion).toBe('Input:\n```\nabc ab c\n```\nOutput:\n```\n3\n```\nInput:\n```\na b\n```\nOutput:\n```\n2\n```');
  });

  it('white-box: the brief white-box prompt with each known program, times each ordering', () => {
    const programs = [...problem.solutions, ...problem.incorrectSolutions];
    const rows = sftRows(problem, 'test', { ...opts, whiteBox: true });
    expect(rows).toHaveLength(programs.length * 4);
    expect(templateFor('code-a1', 'test', true, 'brief').id).toBe('tests-brief-white-box');
    for (const [i, program] of programs.entries()) {
      const prompts = new Set(rows.slice(i * 4, i * 4 + 4).map((r) => r.prompt));
      expect([...prompts]).toEqual([expect.stringContaining('```python\n' + program.trimEnd() + '\n```\n')]);
    }
  });

  it('ACE has no brief prompt (it asks for inputs without expected values)', () => {
    expect(() => templateFor('ace', 'test', false, 'brief')).toThrow(/not for ACE/);
  });
});
