/**
 * gpu-bridge `serve` (a tiny toy model on CPU) driven by the official `openai` package, as a
 * client written elsewhere would drive it: models, completions and chat with n, seed and
 * logprobs, streams, OpenAI's typed errors, and token strings that join to the text when the
 * model emits bytes above 127.
 */
import OpenAI, { BadRequestError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServe, type ServeProcess } from '../../src/bridge/index.js';
import { torchMissing } from '../support/bridge-serve.js';

const TINY = { d_model: 32, n_layers: 2, n_heads: 2, d_ff: 64, max_seq_len: 256 };
const missing = torchMissing();
let serve: ServeProcess;
let sdk: OpenAI;

/** serve's extension beside OpenAI's fields: the sampled token ids of a choice. */
const ids = (c: object) => (c as { token_ids: number[] }).token_ids;

describe.skipIf(missing !== null)(`gpu-bridge serve through the openai package${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    serve = await startServe({ backend: 'toy', config: TINY, seed: 3 });
    sdk = new OpenAI({ baseURL: serve.baseUrl, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });
  });
  afterAll(() => serve?.close());

  it('lists and retrieves the served model', async () => {
    const list = await sdk.models.list();
    expect(list.data.map((m) => m.id)).toEqual([serve.model]);
    expect((await sdk.models.retrieve(serve.model)).id).toBe(serve.model);
    await expect(sdk.models.retrieve('other')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('completions: n choices, reproducible by seed, with logprobs whose tokens join to the text', async () => {
    const req = { model: serve.model, prompt: 'def add(a, b):', n: 3, max_tokens: 8, seed: 5, temperature: 1.2, logprobs: 2 };
    const a = await sdk.completions.create(req);
    expect(a.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    for (const c of a.choices) {
      expect(c.logprobs!.tokens!.join('')).toBe(c.text);
      expect(c.logprobs!.token_logprobs).toHaveLength(ids(c).length);
      expect(Object.keys(c.logprobs!.top_logprobs![0]!)).toHaveLength(2);
    }
    const again = await sdk.completions.create(req);
    expect(again.choices.map(ids)).toEqual(a.choices.map(ids));
    const other = await sdk.completions.create({ ...req, seed: 6 });
    expect(other.choices.map(ids)).not.toEqual(a.choices.map(ids));
    expect(a.usage).toMatchObject({ completion_tokens: a.choices.reduce((s, c) => s + ids(c).length, 0) });
  });

  it('chat: n choices, reproducible by seed, logprobs with top alternatives and bytes', async () => {
    const req = {
      model: serve.model,
      messages: [{ role: 'user' as const, content: 'Say something.' }],
      n: 2,
      max_tokens: 8,
      seed: 5,
      logprobs: true,
      top_logprobs: 2,
    };
    const a = await sdk.chat.completions.create(req);
    expect(a.choices).toHaveLength(2);
    for (const c of a.choices) {
      expect(c.message.role).toBe('assistant');
      const content = c.logprobs!.content!;
      expect(content.map((t) => t.token).join('')).toBe(c.message.content);
      expect(content.flatMap((t) => t.bytes ?? [])).toEqual(ids(c).filter((t) => t < 256));
      expect(content[0]!.top_logprobs).toHaveLength(2);
    }
    const again = await sdk.chat.completions.create(req);
    expect(again.choices.map((c) => c.message.content)).toEqual(a.choices.map((c) => c.message.content));
  });

  it('errors are typed as OpenAI types them, with the message', async () => {
    const bad = await sdk.completions.create({ model: serve.model, prompt: 'x', top_p: 2 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(BadRequestError);
    expect((bad as BadRequestError).message).toMatch(/top_p must be in \(0, 1\], got 2/);
    const zero = await sdk.chat.completions.create({ model: serve.model, messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }).catch((e: unknown) => e);
    expect(zero).toBeInstanceOf(BadRequestError);
    expect((zero as BadRequestError).message).toMatch(/max_tokens must be an integer of at least 1/);
    await expect(sdk.completions.create({ model: 'other', prompt: 'x' })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('completions: max_tokens 0 samples nothing; absent, up to 16 tokens', async () => {
    const zero = await sdk.completions.create({ model: serve.model, prompt: 'hi', max_tokens: 0 });
    expect(zero.choices[0]).toMatchObject({ text: '', finish_reason: 'length' });
    expect(ids(zero.choices[0]!)).toEqual([]);
    const dflt = await sdk.completions.create({ model: serve.model, prompt: 'hi', temperature: 0 });
    const c = dflt.choices[0]!;
    expect(ids(c).length === 16 || c.finish_reason === 'stop').toBe(true);
  });

  it('streams completions and chat: the chunks join to the unstreamed answer, ending the stream', async () => {
    const req = { model: serve.model, prompt: 'def f(x):', n: 2, max_tokens: 10, seed: 8, temperature: 1.3, logprobs: 1 };
    const whole = await sdk.completions.create(req);
    const text = ['', ''];
    const tokens: string[][] = [[], []];
    const finish: (string | null)[] = [null, null];
    for await (const chunk of await sdk.completions.create({ ...req, stream: true })) {
      for (const c of chunk.choices) {
        text[c.index] += c.text;
        tokens[c.index]!.push(...(c.logprobs?.tokens ?? []));
        finish[c.index] = c.finish_reason ?? finish[c.index]!;
      }
    }
    expect(text).toEqual(whole.choices.map((c) => c.text));
    expect(tokens).toEqual(whole.choices.map((c) => c.logprobs!.tokens));
    expect(finish).toEqual(whole.choices.map((c) => c.finish_reason));

    const chat = {
      model: serve.model,
      messages: [{ role: 'user' as const, content: 'hello' }],
      max_tokens: 10,
      seed: 8,
      stream_options: { include_usage: true },
    };
    const one = await sdk.chat.completions.create(chat);
    let content = '';
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of await sdk.chat.completions.create({ ...chat, stream: true })) {
      chunks++;
      content += chunk.choices[0]?.delta.content ?? '';
      usage = chunk.usage ?? usage;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(content).toBe(one.choices[0]!.message.content);
    expect(usage).toEqual(one.usage);
  });

  it('bytes above 127: the token strings still join to the text (U+FFFD where the bytes are not UTF-8)', async () => {
    const r = await sdk.completions.create({ model: serve.model, prompt: 'z', n: 4, max_tokens: 16, seed: 1, temperature: 2, logprobs: 0 });
    const all = r.choices.flatMap(ids);
    expect(all.some((t) => t >= 128)).toBe(true);
    for (const c of r.choices) expect(c.logprobs!.tokens!.join('')).toBe(c.text);
    expect(r.choices.some((c) => /[^\x00-\x7f]/.test(c.text))).toBe(true);
  });
});
