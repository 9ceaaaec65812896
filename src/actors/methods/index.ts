/** The Judge's dispatch: one module per method's judgement. */
import type { Method } from '../../config/schema.js';
import type { MethodJudgement } from './contract.js';
import { codeA1, selfPlay } from '../judging.js';
import { cure } from './cure.js';
import { ace } from './ace.js';
import { tcs } from './tcs.js';
import { golden } from './golden.js';
import { evolveCoder } from './evolvecoder.js';

/** ACE never sees a reference program: its judgement gets the problem without solutions. */
const withoutReference = (m: MethodJudgement): MethodJudgement => ({
  oracle: (env, problem, round) => m.oracle(env, { ...problem, solutions: [] }, round),
  plan: (a) => m.plan({ ...a, problem: { ...a.problem, solutions: [] } }),
  judge: (a) => m.judge({ ...a, problem: { ...a.problem, solutions: [] } }),
});

const JUDGEMENTS: Record<Method, MethodJudgement> = {
  'code-a1': codeA1,
  'self-play': selfPlay,
  cure,
  tcs,
  evolvecoder: evolveCoder,
  ace: withoutReference(ace),
  'golden-tests': golden,
};

export function judgementOf(method: Method): MethodJudgement {
  return JUDGEMENTS[method];
}

/** The training algorithm of each role's batch: ACE fine-tunes robust programs (SFT) and trains
 * test labels with KTO; the others use GRPO advantages. */
export function algorithmOf(method: Method, role: 'code' | 'test'): 'grpo' | 'sft' | 'kto' {
  if (method === 'ace') return role === 'code' ? 'sft' : 'kto';
  return 'grpo';
}
