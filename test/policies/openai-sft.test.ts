/**
 * The warm-start rows of served policies: the test role learns every ordering of a problem's
 * public examples (a policy trained on one fixed suite writes only it, and a group of identical
 * suites has no GRPO gradient), white-box with each known program in the prompt.
 */
import { describe, expect, it } from 'vitest';
import { sftRows, suiteSelections } from '../../src/policies/openai/sft.js';
import { templateFor } from '../../src/policies/openai/prompts.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import { parseConfig } from '../../src/config/load.js';

describe('suiteSelections', () => {
  it('every ordered selection of up to max tests, longest first', () => {
    expect(suiteSelections(['a', 'b'], 4)).toEqual([['a', 'b'], ['b', 'a'], ['a'], ['b']]);
    expect(suiteSelections(['a', 'b', 'c'], 2)).toHaveLength(3 + 6);
    expect(suiteSelections(['a', 'b', 'c'], 8)).toHaveLength(3 + 6 + 6);
    expect(suiteSelections(['a'], 4)).toEqual([['a']]);
    expect(suiteSelections([], 4)).toEqual([]);
  });

  it('past three tests: the list in order and reversed, cut to max', () => {
    expect(suiteSelections([1, 2, 3, 4, 5], 3)).toEqual([
      [1, 2, 3],
      [5, 4, 3],
    ]);
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

describe('learner.sft.steps and learner.bridge.threads', () => {
  const openai = { model: 'toy-policy' };
  const base = { policies: { code: { backend: 'openai', openai }, test: { backend: 'openai', openai } } };
  const learner = (sft: unknown, bridge: Record<string, unknown> = {}) => parseConfig({ ...base, learner: { sft, bridge: { serve: {}, ...bridge } } }).learner;

  it('steps: one number for both roles, or each role its own; threads for the trainer process', () => {
    expect(learner({ steps: 5 }).sft!.steps).toBe(5);
    expect(learner({ steps: { code: 5, test: 2 } }).sft!.steps).toEqual({ code: 5, test: 2 });
    expect(learner({ steps: 5 }, { threads: 1 }).bridge!.threads).toBe(1);
    expect(learner({ steps: 5 }).bridge!.threads).toBeUndefined();
  });

  it('refuses a role left out, zero steps, or zero threads, naming the key', () => {
    expect(() => learner({ steps: { code: 5 } })).toThrow(/learner\.sft\.steps/);
    expect(() => learner({ steps: { code: 5, test: 0 } })).toThrow(/learner\.sft\.steps/);
    expect(() => learner({ steps: 5 }, { threads: 0 })).toThrow(/learner\.bridge\.threads/);
  });
});
