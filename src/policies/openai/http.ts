/**
 * One sampling request against an OpenAI-compatible server, tried until it gives exactly the
 * choices asked for: every failed try (connection refused, timeout, HTTP error, a body that is
 * not JSON or not the protocol, no choices, the wrong number of them) is kept as a
 * RequestFailure so the caller can record it, and retried after an exponential backoff.
 * A request either yields all n choices of one answer or throws: never part of them.
 */
import { z } from 'zod';
import type { OpenAIPolicyOptions } from './config.js';
import { ModelRequestError } from './errors.js';
import { Limiter } from '../../core/limiter.js';
import { backoffMs } from '../../core/backoff.js';

export const FAILURE_KINDS = ['network', 'timeout', 'http-status', 'malformed-json', 'bad-shape', 'empty-choices', 'wrong-n'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

export interface RequestFailure {
  /** 1 for the first try. */
  attempt: number;
  kind: FailureKind;
  message: string;
  /** HTTP status when a response came, else null. */
  status: number | null;
  /** Whether another try follows, and after how long. */
  retrying: boolean;
  delayMs: number;
}

export interface SampledChoice {
  index: number;
  text: string;
  finishReason: string | null;
  /** As sampled (the server's own ids), when the server returns them. */
  tokenIds: number[] | null;
  /** Sampling log-probability of each generated token, when returned. */
  tokenLogprobs: number[] | null;
}

export interface CompletionRequest {
  prompt: string;
  n: number;
  seed: number;
  /** The model name to ask for, when not the configured one (vLLM: a version's LoRA adapter). */
  model?: string;
}

export interface CompletionAnswer {
  choices: SampledChoice[];
  /** The server's `system_fingerprint` (gpu-bridge: the served version, "v3"), or null. */
  fingerprint: string | null;
  model: string | null;
  /** Failed tries before the one that answered. */
  failures: RequestFailure[];
}

const Logprobs = z.object({ token_logprobs: z.array(z.number().nullable()) }).nullish();
const ChatLogprobs = z.object({ content: z.array(z.object({ logprob: z.number() })).nullable() }).nullish();
const TokenIds = z.array(z.number().int().nonnegative()).nullish();

const CompletionsBody = z.object({
  model: z.string().nullish(),
  system_fingerprint: z.string().nullish(),
  choices: z.array(
    z.object({
      index: z.number().int().nonnegative().optional(),
      text: z.string(),
      finish_reason: z.string().nullish(),
      logprobs: Logprobs,
      token_ids: TokenIds,
    }),
  ),
});
const ChatBody = z.object({
  model: z.string().nullish(),
  system_fingerprint: z.string().nullish(),
  choices: z.array(
    z.object({
      index: z.number().int().nonnegative().optional(),
      message: z.object({ content: z.string().nullable() }),
      finish_reason: z.string().nullish(),
      logprobs: ChatLogprobs,
      token_ids: TokenIds,
    }),
  ),
});

class TryFailed extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly status: number | null,
    /** False when another try cannot help (a 400: the request itself is wrong). */
    readonly retryable = true,
  ) {
    super(message);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class OpenAIClient {
  readonly #limiter: Limiter;
  readonly url: string;

  constructor(readonly options: OpenAIPolicyOptions) {
    this.#limiter = new Limiter(options.concurrency);
    this.url = `${options.baseUrl.replace(/\/+$/, '')}/${options.api === 'chat' ? 'chat/completions' : 'completions'}`;
  }

  /** The request body as sent: what a sample records as its sampling parameters. */
  body(req: CompletionRequest): Record<string, unknown> {
    const o = this.options;
    const common = {
      model: req.model ?? o.model,
      n: req.n,
      seed: req.seed,
      temperature: o.temperature,
      top_p: o.topP,
      max_tokens: o.maxTokens,
      ...(o.stop.length ? { stop: o.stop } : {}),
    };
    if (o.api === 'chat') return { ...common, messages: [{ role: 'user', content: req.prompt }], ...(o.logprobs ? { logprobs: true } : {}) };
    return { ...common, prompt: req.prompt, ...(o.logprobs ? { logprobs: 1 } : {}) };
  }

  async complete(req: CompletionRequest): Promise<CompletionAnswer> {
    const { attempts, baseDelayMs, maxDelayMs } = this.options.retry;
    const failures: RequestFailure[] = [];
    for (let attempt = 1; ; attempt++) {
      try {
        const answer = await this.#limiter.run(() => this.#try(req));
        return { ...answer, failures };
      } catch (e) {
        const f = e instanceof TryFailed ? e : new TryFailed('network', e instanceof Error ? e.message : String(e), null);
        const retrying = f.retryable && attempt < attempts;
        const delayMs = retrying ? backoffMs(baseDelayMs, maxDelayMs, attempt) : 0;
        failures.push({ attempt, kind: f.kind, message: f.message, status: f.status, retrying, delayMs });
        if (!retrying) throw new ModelRequestError(this.url, failures);
        await sleep(delayMs);
      }
    }
  }

  async #try(req: CompletionRequest): Promise<Omit<CompletionAnswer, 'failures'>> {
    const o = this.options;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (o.apiKeyEnv) {
      const key = process.env[o.apiKeyEnv];
      if (!key) throw new TryFailed('network', `environment variable ${o.apiKeyEnv} (the API key) is not set`, null, false);
      headers.authorization = `Bearer ${key}`;
    }
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), o.timeoutMs);
    let status: number;
    let text: string;
    try {
      const res = await fetch(this.url, { method: 'POST', headers, body: JSON.stringify(this.body(req)), signal: abort.signal });
      status = res.status;
      // The body is read under the same deadline: a server that sends headers and then stalls is a timeout too.
      text = await res.text();
    } catch (e) {
      if (abort.signal.aborted) throw new TryFailed('timeout', `no complete answer within ${o.timeoutMs} ms`, null);
      const cause = e instanceof Error && e.cause instanceof Error ? `: ${e.cause.message}` : '';
      throw new TryFailed('network', `${e instanceof Error ? e.message : String(e)}${cause}`, null);
    } finally {
      clearTimeout(timer);
    }
    if (status < 200 || status >= 300) {
      // 408/409/429 and 5xx are the server's state; any other 4xx is this request's fault.
      const retryable = status >= 500 || status === 408 || status === 409 || status === 429;
      throw new TryFailed('http-status', `HTTP ${status}: ${text.slice(0, 300)}`, status, retryable);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new TryFailed('malformed-json', `the body is not JSON: ${JSON.stringify(text.slice(0, 200))}`, status);
    }
    const choices = this.#choices(json, status);
    if (choices.length === 0) throw new TryFailed('empty-choices', 'the answer has no choices', status);
    if (choices.length !== req.n) throw new TryFailed('wrong-n', `asked for ${req.n} choices, got ${choices.length}`, status);
    const meta = json as { model?: string | null; system_fingerprint?: string | null };
    return { choices, fingerprint: meta.system_fingerprint ?? null, model: meta.model ?? null };
  }

  #choices(json: unknown, status: number): SampledChoice[] {
    const logprobsOf = (lp: (number | null)[] | null | undefined) => (lp && lp.every((x) => x !== null) ? (lp as number[]) : null);
    if (this.options.api === 'chat') {
      const parsed = ChatBody.safeParse(json);
      if (!parsed.success) throw new TryFailed('bad-shape', `not a chat completion: ${z.prettifyError(parsed.error).slice(0, 300)}`, status);
      return sortByIndex(
        parsed.data.choices.map((c, i) => ({
          index: c.index ?? i,
          text: c.message.content ?? '',
          finishReason: c.finish_reason ?? null,
          tokenIds: c.token_ids ?? null,
          tokenLogprobs: logprobsOf(c.logprobs?.content?.map((t) => t.logprob)),
        })),
      );
    }
    const parsed = CompletionsBody.safeParse(json);
    if (!parsed.success) throw new TryFailed('bad-shape', `not a completion: ${z.prettifyError(parsed.error).slice(0, 300)}`, status);
    return sortByIndex(
      parsed.data.choices.map((c, i) => ({
        index: c.index ?? i,
        text: c.text,
        finishReason: c.finish_reason ?? null,
        tokenIds: c.token_ids ?? null,
        tokenLogprobs: logprobsOf(c.logprobs?.token_logprobs),
      })),
    );
  }
}

function sortByIndex(choices: SampledChoice[]): SampledChoice[] {
  const sorted = [...choices].sort((a, b) => a.index - b.index);
  // Indexes 0..n-1, each once: anything else is not n distinct samples.
  sorted.forEach((c, i) => {
    if (c.index !== i) throw new TryFailed('bad-shape', `choice indexes are not 0..${choices.length - 1}: ${choices.map((x) => x.index).join(',')}`, 200);
  });
  return sorted;
}
