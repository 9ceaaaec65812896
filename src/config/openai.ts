/**
 * Settings of a policy sampled from an OpenAI-compatible server (vLLM, SGLang, gpu-bridge's
 * `serve`). Strict, so a misspelled key is an error that names it.
 */
import { z } from 'zod';

export const RetryOptions = z
  .object({
    /** Tries per request, the first included. */
    attempts: z.number().int().positive().default(5),
    /** Delay before the second try; doubled each further try, capped at maxDelayMs. */
    baseDelayMs: z.number().int().nonnegative().default(250),
    maxDelayMs: z.number().int().nonnegative().default(8000),
  })
  .strict();

export const OpenAIPolicyOptions = z
  .object({
    /** e.g. http://127.0.0.1:8000/v1 (the path up to, not including, /completions). */
    baseUrl: z.url(),
    model: z.string().min(1),
    /** completions: raw prompt text (token ids and log-probs per choice); chat: one user message. */
    api: z.enum(['completions', 'chat']).default('completions'),
    /** Name of the environment variable holding the API key, if the server wants one. */
    apiKeyEnv: z.string().min(1).optional(),
    temperature: z.number().nonnegative().default(1),
    topP: z.number().gt(0).max(1).default(1),
    maxTokens: z.number().int().positive().default(512),
    stop: z.array(z.string().min(1)).default([]),
    /** Ask for sampling log-probabilities (recorded with the token ids when returned). */
    logprobs: z.boolean().default(true),
    /** Requests in flight at once against this server. */
    concurrency: z.number().int().positive().default(4),
    /** A request with no complete answer after this long is abandoned and retried. */
    timeoutMs: z.number().int().positive().default(120_000),
    retry: RetryOptions.default(RetryOptions.parse({})),
  })
  .strict();
export type OpenAIPolicyOptions = z.infer<typeof OpenAIPolicyOptions>;
export type OpenAIPolicyOptionsInput = z.input<typeof OpenAIPolicyOptions>;

/** Training served policies through a gpu-bridge process (`python3 -m gpu_bridge --stdio`):
 * one bridge policy per role, checkpoints published per version and loaded into the server. */
export const BridgeTrainerOptions = z
  .object({
    backend: z.enum(['toy', 'hf']).default('toy'),
    /** hf: model path or id; toy: absent (random weights from `seed` and `config`). */
    model: z.string().min(1).optional(),
    /** toy: the model shape (d_model, n_layers, ...); hf: extra config. Must match the server's. */
    config: z.record(z.string(), z.unknown()).optional(),
    seed: z.number().int().nonnegative().default(0),
    device: z.string().default('auto'),
    python: z.string().default('/usr/bin/python3'),
    /** Where versions are published, one folder per role; default <run dir>/checkpoints. */
    checkpoints: z.string().min(1).optional(),
    microBatchSize: z.number().int().positive().optional(),
    /** After each publish, load the version into the model server (gpu-bridge serve's
     * /admin/load_version), with the admin token read from this environment variable. */
    reload: z.object({ adminTokenEnv: z.string().min(1) }).strict().optional(),
    retry: RetryOptions.default(RetryOptions.parse({})),
  })
  .strict();
export type BridgeTrainerOptions = z.infer<typeof BridgeTrainerOptions>;
