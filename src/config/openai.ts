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
    /** Prompt templates: full (the method's own) or brief (statement's first paragraph and the
     * interface only: for a small model with a short context, black-box only). */
    prompts: z.enum(['full', 'brief']).default('full'),
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

/** The openai section of a run config: baseUrl is left out when the run starts its own servers
 * (learner.bridge.serve); the run then samples from where they listen. */
export const OpenAIPolicySection = OpenAIPolicyOptions.extend({ baseUrl: z.url().optional() }).strict();
export type OpenAIPolicySection = z.infer<typeof OpenAIPolicySection>;

/** How a published version reaches the model server that samples it (weight sync):
 * - bridge: gpu-bridge serve's POST /admin/load_version {path, sha256} (hash-verified);
 * - vllm-lora: vLLM's POST /v1/load_lora_adapter {lora_name, lora_path}, one adapter name per
 *   version (`<prefix>-v<version>`), which the samples of that version then ask for as their model;
 * - sglang: SGLang's POST /update_weights_from_disk {model_path}.
 * The bearer token, when the server wants one, is read from the named environment variable. */
export const WeightSync = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('bridge'), adminTokenEnv: z.string().min(1) }).strict(),
  z
    .object({
      kind: z.literal('vllm-lora'),
      apiKeyEnv: z.string().min(1).optional(),
      prefix: z
        .string()
        .regex(/^[\w.-]+$/)
        .optional(),
    })
    .strict(),
  z.object({ kind: z.literal('sglang'), apiKeyEnv: z.string().min(1).optional() }).strict(),
]);
export type WeightSync = z.infer<typeof WeightSync>;

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
    reload: z
      .object({ adminTokenEnv: z.string().min(1) })
      .strict()
      .optional(),
    /** Weight sync after each publish, for any server kind (reload is weightSync kind bridge). */
    weightSync: WeightSync.optional(),
    /** Start one gpu-bridge serve per role for the run (this backend, model and config, CPU
     * threads each), on free loopback ports with a fresh admin token, and sync each published
     * version into it; the roles' openai sections then give no baseUrl. */
    serve: z
      .object({ threads: z.number().int().positive().default(1) })
      .strict()
      .optional(),
    /** CPU threads of the trainer process (torch and BLAS); absent: torch's default (all
     * cores). On a small shared machine one thread is faster: threads of one product spin
     * waiting for each other while other processes hold the cores. */
    threads: z.number().int().positive().optional(),
    retry: RetryOptions.default(RetryOptions.parse({})),
  })
  .strict();
export type BridgeTrainerOptions = z.infer<typeof BridgeTrainerOptions>;
