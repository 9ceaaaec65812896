/**
 * The policy and trainer ports. The catalog policy (offline demo) implements them now; an LLM
 * backend (OpenAI-compatible server, gpu-bridge) implements the same shapes: text in, text out.
 */
import { z } from 'zod';
import { Role } from '../core/roles.js';

export const GenerateRequest = z.object({
  role: Role,
  /** The policy version to sample from; a backend that cannot serve it fails with VersionError. */
  version: z.number().int().nonnegative(),
  seed: z.number().int(),
  prompts: z.array(
    z.object({
      key: z.string().min(1),
      prompt: z.string(),
      /** Structured side data: problemId, target candidate (white-box)... LLMs may ignore it. */
      context: z.record(z.string(), z.string()),
    }),
  ),
  /** Samples per prompt. */
  n: z.number().int().positive(),
});
export type GenerateRequest = z.infer<typeof GenerateRequest>;

export interface Generation {
  promptKey: string;
  index: number;
  text: string;
  /** Catalog: the chosen candidate id (code) or comma-joined test ids (test suite). LLM: null. */
  choiceKey: string | null;
  /** Catalog: the conditioning context the choice was drawn under, to be passed back in
   * TrainSample.contextKey. LLM: null. */
  contextKey: string | null;
  /** Log-probability of the whole generation under the sampling policy, when known. */
  logprob: number | null;
  /** Model backends: how the sample was drawn and read, to be recorded beside it. Catalog: absent. */
  record?: SampleRecord;
}

/** A failed try of a request to a model server (recorded; the request was retried or given up). */
export interface RequestFailureRecord {
  attempt: number;
  kind: string;
  message: string;
  status: number | null;
  retrying: boolean;
  delayMs: number;
}

/** What a model backend knows about one sample: the exact prompt (and its template), the raw
 * answer, the sampling parameters as sent, the tokens, and how the answer was read. */
export interface SampleRecord {
  requestId: string;
  template: { id: string; version: number };
  prompt: string;
  response: string;
  /** The request body as sent, less the prompt. */
  params: Record<string, unknown>;
  seed: number;
  served: { model: string | null; fingerprint: string | null };
  finishReason: string | null;
  tokenIds: number[] | null;
  tokenLogprobs: number[] | null;
  parse: { status: 'ok' | 'partial' | 'invalid'; form: string; found: number; usable: number; detail: string | null };
  /** Failed tries of the request before it answered; on the request's first sample only, so
   * each failure is recorded once. */
  failures: RequestFailureRecord[];
}

export interface PolicyPort {
  generate(req: GenerateRequest): Promise<Generation[]>;
}

export const TrainSample = z.object({
  prompt: z.string(),
  response: z.string(),
  advantage: z.number().finite(),
  contextKey: z.string().nullable(),
  choiceKey: z.string().nullable(),
  /** Model samples whose server returned them: the completion's token ids as sampled and each
   * token's log-probability under the sampling policy (GRPO's old log-probs). Absent otherwise. */
  sampled: z.strictObject({ tokenIds: z.array(z.int().nonnegative()), logprobs: z.array(z.number().finite().max(0)) }).optional(),
});
export type TrainSample = z.infer<typeof TrainSample>;

export const TrainStepRequest = z.object({
  batchId: z.string().min(1),
  role: Role,
  /** The version the samples were generated from; a mismatch is a VersionError, nothing applied. */
  expectedVersion: z.number().int().nonnegative(),
  algorithm: z.enum(['grpo', 'kto', 'sft']),
  samples: z.array(TrainSample),
  hyper: z.record(z.string(), z.number()),
});
export type TrainStepRequest = z.infer<typeof TrainStepRequest>;

export interface TrainStepResult {
  version: number;
  metrics: Record<string, number>;
  /** Tries of this step that failed before it applied (nothing was applied by them); recorded
   * as TrainingStepFailed. Absent when the trainer cannot fail that way. */
  failures?: { error: string; retryable: boolean }[];
}

export interface TrainerPort {
  trainStep(req: TrainStepRequest): Promise<TrainStepResult>;
  snapshot(): Promise<{ version: number; paramsHash: string }>;
}

/** A request named a version other than the one held (stale batch, or a replay out of order). */
export class VersionError extends Error {
  constructor(
    readonly role: Role,
    readonly expected: number,
    readonly actual: number,
  ) {
    super(`${role} policy is at version ${actual}, the request expected ${expected}`);
    this.name = 'VersionError';
  }
}

/** A request the policy cannot serve: unknown problem, candidate, malformed sample. */
export class PolicyInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyInputError';
  }
}
