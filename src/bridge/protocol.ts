/**
 * The gpu-bridge wire protocol (JSON lines), validated with zod on the way in.
 * Request `{v, id, op, idem, args}`; reply `{id, ok: true, result}` or `{id, ok: false, error}`;
 * event lines `{event: "heartbeat" | "progress", ...}` come between replies.
 */
import { z } from 'zod';

export const PROTOCOL_VERSION = 1;

export const OPS = ['hello', 'load_policy', 'generate', 'logprobs', 'train_step', 'publish', 'save_state', 'load_state', 'status', 'shutdown'] as const;
export type Op = (typeof OPS)[number];

export const ErrorBody = z.object({ code: z.string(), message: z.string(), retryable: z.boolean() });

const Id = z.union([z.string(), z.number().int()]).nullable();

export const OkReply = z.object({ id: Id, ok: z.literal(true), result: z.unknown() });
export const ErrReply = z.object({ id: Id, ok: z.literal(false), error: ErrorBody });
export const Reply = z.discriminatedUnion('ok', [OkReply, ErrReply]);
export type Reply = z.infer<typeof Reply>;

export const HeartbeatEvent = z.object({ event: z.literal('heartbeat'), seq: z.number(), t: z.number(), busy: z.string().nullable() });
export const ProgressEvent = z.looseObject({ event: z.literal('progress'), id: Id, op: z.string() });
export const BridgeEvent = z.discriminatedUnion('event', [HeartbeatEvent, ProgressEvent]);
export type BridgeEvent = z.infer<typeof BridgeEvent>;

const nullableNum = z.number().nullable();

export const HelloResult = z.object({
  protocol: z.literal(PROTOCOL_VERSION),
  bridge: z.string(),
  python: z.string(),
  torch: z.string(),
  pid: z.number().int(),
  device: z.looseObject({ type: z.enum(['cpu', 'cuda']), count: z.number().int(), name: z.string() }),
  /** The BLAS and LAPACK files the bridge loaded (a bridge before this field: none said). */
  blas: z.array(z.string()).default([]),
  capabilities: z.object({
    backends: z.record(z.string(), z.looseObject({ available: z.boolean(), missing: z.array(z.string()) })),
    ops: z.array(z.string()),
    algorithms: z.array(z.string()),
    aggregations: z.array(z.string()),
  }),
  max_request_bytes: z.number().int().positive(),
  policies: z.record(z.string(), z.number().int()),
});
export type HelloResult = z.infer<typeof HelloResult>;

export const PolicyInfo = z.looseObject({
  policy: z.string(),
  version: z.number().int().nonnegative(),
  steps: z.number().int().nonnegative(),
  backend: z.enum(['toy', 'hf']),
  device: z.string(),
  params: z.number().int(),
});
export type PolicyInfo = z.infer<typeof PolicyInfo>;

export const Sample = z.object({
  text: z.string(),
  token_ids: z.array(z.number().int()),
  finish_reason: z.enum(['stop', 'length']),
  logprobs: z.array(z.number()).optional(),
  tokens: z.array(z.string()).optional(),
});
export const GenerateResult = z.object({
  version: z.number().int(),
  outputs: z.array(z.array(Sample)),
  tokens: z.number().int(),
  seconds: z.number(),
  tokens_per_s: nullableNum,
});
export type GenerateResult = z.infer<typeof GenerateResult>;

export const LogprobsResult = z.object({
  version: z.number().int(),
  logprobs: z.array(z.array(z.number())),
  sums: z.array(z.number()),
});
export type LogprobsResult = z.infer<typeof LogprobsResult>;

export const TrainStepResult = z.looseObject({
  batch_id: z.string(),
  version: z.number().int().positive(),
  algorithm: z.enum(['grpo', 'kto', 'sft']),
  samples: z.number().int(),
  micro_batches: z.number().int(),
  loss: z.number(),
  kl: nullableNum,
  entropy: nullableNum.optional(),
  clip_fraction: z.number().optional(),
  grad_norm: z.number(),
  tokens: z.number().int(),
  tokens_per_s: nullableNum,
  seconds: z.number(),
  peak_memory_bytes: z.number(),
  duplicate: z.boolean(),
});
export type TrainStepResult = z.infer<typeof TrainStepResult>;

export const PublishResult = z.object({
  path: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  version: z.number().int(),
  /** The optimizer state is in the checkpoint (restored by load_policy). */ optimizer: z.boolean().optional(),
});
export type PublishResult = z.infer<typeof PublishResult>;

export const SaveStateResult = z.object({ path: z.string(), sha256: z.string(), bytes: z.number().int(), version: z.number().int() });
export type SaveStateResult = z.infer<typeof SaveStateResult>;

export const StatusResult = z.looseObject({
  uptime_s: z.number(),
  requests: z.number().int(),
  policies: z.record(z.string(), PolicyInfo),
  peak_memory_bytes: z.number(),
});
export type StatusResult = z.infer<typeof StatusResult>;

export const ShutdownResult = z.object({ bye: z.literal(true) });

/** Arguments, typed for callers (the bridge validates them again and names what is wrong). */
export interface LoadPolicyArgs {
  policy?: string;
  backend: 'toy' | 'hf';
  model?: string;
  config?: Record<string, unknown>;
  seed?: number;
  version?: number;
  reference?: boolean;
  device?: string;
  dtype?: 'float32' | 'bfloat16' | 'float16';
  lora?: { r?: number; alpha?: number; dropout?: number; target_modules?: string | string[] };
  optimizer?: { lr?: number; betas?: [number, number]; eps?: number; weight_decay?: number; max_grad_norm?: number };
}

export interface GenerateArgs {
  policy?: string;
  prompts?: string[];
  prompt_ids?: number[][];
  n?: number;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string[];
  seed?: number;
  logprobs?: boolean;
  top_logprobs?: number;
  version?: number;
}

export type Algorithm = 'grpo' | 'kto' | 'sft';

export interface TrainHyper {
  lr?: number;
  max_grad_norm?: number;
  clip_low?: number;
  clip_high?: number;
  dual_clip?: number;
  kl_coef?: number;
  aggregation?: 'token-mean' | 'seq-mean-token-mean' | 'constant';
  constant?: number;
  beta?: number;
  desirable_weight?: number;
  undesirable_weight?: number;
  entropy?: boolean;
}

export interface TrainStepArgs {
  policy?: string;
  batch_id: string;
  expected_version: number;
  algorithm: Algorithm;
  batch: { path: string; sha256: string };
  micro_batch_size?: number;
  hyper?: TrainHyper;
}
