/**
 * Public surface of src/rewards and the registry of versioned reward functions, so a run config
 * can name one ("code-a1/v1"). A changed formula gets a new id; old ids keep their meaning so
 * recorded runs re-project identically.
 */
import { z } from 'zod';
import { ACE_ID, aceLabels } from './ace.js';
import { CODE_A1_ID, codeA1Rewards } from './code-a1.js';
import { CURE_ID, CURE_POST_STAGE_ID, cureRewards } from './cure.js';
import { RewardInputError } from './matrix.js';
import { TCS_ID, tcsStage1Reward, tcsStage2Reward } from './tcs.js';

export * from './matrix.js';
export * from '../core/rng.js';
export * from './test-key.js';
export * from './code-a1.js';
export * from './cure.js';
export * from './grpo.js';
export * from './metrics.js';
export * from './evolvecoder.js';
export * from './ace.js';
export * from './tcs.js';
export {
  emptyMistakeBook,
  updateMistakeBook,
  applyMistakeBookChanges,
  topTests,
  isBlacklisted,
  MistakeBookOptions,
  MistakeObservation,
  MistakeRound,
  type MistakeBookState,
  type MistakeBookChange,
  type MistakeBooks,
  type MistakeCause,
  type MistakeEntry,
  type MistakeBookUpdate,
  type MistakeBookOptionsInput,
  type ReplayTest,
} from './mistake-book.js';

const tcs = { stage1: tcsStage1Reward, stage2: tcsStage2Reward } as const;

/** id -> reward function. Each id names one exact formula. */
export const REWARD_FUNCTIONS = {
  [CODE_A1_ID]: codeA1Rewards,
  [CURE_ID]: cureRewards,
  [CURE_POST_STAGE_ID]: cureRewards,
  [ACE_ID]: aceLabels,
  [TCS_ID]: tcs,
} as const;

export type RewardId = keyof typeof REWARD_FUNCTIONS;
export const REWARD_IDS = Object.keys(REWARD_FUNCTIONS).sort() as RewardId[];
export const RewardIdSchema = z.enum(REWARD_IDS as [RewardId, ...RewardId[]]);

export function isRewardId(id: string): id is RewardId {
  return Object.prototype.hasOwnProperty.call(REWARD_FUNCTIONS, id);
}

/** The reward function a config names; throws naming the known ids. */
export function getRewardFunction<K extends RewardId>(id: K): (typeof REWARD_FUNCTIONS)[K];
export function getRewardFunction(id: string): (typeof REWARD_FUNCTIONS)[RewardId];
export function getRewardFunction(id: string): (typeof REWARD_FUNCTIONS)[RewardId] {
  if (!isRewardId(id)) {
    throw new RewardInputError(`unknown reward function "${id}"; known: ${REWARD_IDS.join(', ')}`);
  }
  return REWARD_FUNCTIONS[id];
}
