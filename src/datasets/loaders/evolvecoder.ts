/**
 * EvolveCoder: the released EvolveCoder-22K rows ({id, question, tests: assert strings}) and the
 * pipeline's round files (step2.2 eval rows: synthesis_result.{problem, tests, hash_id}). No
 * reference solutions exist; the evolved asserts are model-written, so they go to `generated`
 * (and some of their expected values are wrong: the pipeline filters by candidate pass rates).
 */
import { z } from 'zod';
import type { ProblemInput } from '../../core/problem.js';
import { entryPointFromAsserts, parseRow } from './common.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const Asserts = z.array(z.string().min(1)).min(1, 'needs at least one test');

const ReleasedRow = z.object({
  id: z.union([z.string().min(1), z.number().int()]),
  question: z.string(),
  tests: Asserts,
});

const RoundRow = z.object({
  id: z.union([z.string().min(1), z.number().int()]),
  synthesis_result: z.object({ problem: z.string(), tests: Asserts, hash_id: z.string().optional() }),
});

export const evolveCoderLoader: DatasetLoader = {
  format: 'evolvecoder',
  description: 'EvolveCoder-22K rows {id, question, tests} or EvolveCoder round files (synthesis_result)',
  defaultSource: 'evolvecoder',
  // The EvolveCoder pipeline runs each assert with a 1 s limit.
  defaultLimits: { timeSeconds: 1, memoryMb: 1024 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const isRound = raw !== null && typeof raw === 'object' && 'synthesis_result' in raw;
    const { id, statement, tests } = isRound
      ? (() => {
          const r = parseRow(RoundRow, raw);
          return { id: String(r.id), statement: r.synthesis_result.problem, tests: r.synthesis_result.tests };
        })()
      : (() => {
          const r = parseRow(ReleasedRow, raw);
          return { id: String(r.id), statement: r.question, tests: r.tests };
        })();
    const bad = tests.findIndex((t) => !/^\s*assert\b/.test(t));
    if (bad >= 0) throw new RowRejected(`tests.${bad} is not an assert statement`, id);
    const entryPoint = entryPointFromAsserts(tests);
    if (!entryPoint) throw new RowRejected('cannot tell which function the asserts call', id);
    return {
      id: `${ctx.source}/${id}`,
      source: ctx.source,
      statement,
      style: 'assert',
      entryPoint,
      tests: { public: [], private: [], generated: tests.map((code) => ({ style: 'assert', code: `${code.trim()}\n` })) },
      solutions: [],
      incorrectSolutions: [],
      limits: ctx.limits,
    };
  },
};
