/**
 * The OpenAI-compatible client and policy against StandInOpenAIServer (a stand-in: no model
 * server runs here): every kind of bad answer is a recorded failure followed by a retry, the
 * group of n samples comes out whole, and the records say how each sample was drawn and read.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OpenAIClient, OpenAIPolicy, OpenAIPolicyOptions, ModelRequestError } from '../../src/policies/openai/index.js';
import type { Problem } from '../../src/core/problem.js';
import { StandInOpenAIServer, type Fault } from '../support/stand-in-openai-server.js';

let server: StandInOpenAIServer;

beforeAll(async () => {
  server = await StandInOpenAIServer.start(({ seed, n }) => Array.from({ length: n }, (_, i) => `answer ${seed} ${i}`), { fingerprint: 'v7' });
});
afterAll(() => server.close());
beforeEach(() => {
  server.faults = [];
  server.requests.length = 0;
});

const options = (over: Record<string, unknown> = {}) =>
  OpenAIPolicyOptions.parse({ baseUrl: server.baseUrl, model: 'stand-in', timeoutMs: 300, retry: { attempts: 4, baseDelayMs: 5, maxDelayMs: 20 }, ...over });

describe('OpenAIClient', () => {
  it('sends the sampling parameters and returns n choices with tokens, log-probs and the fingerprint', async () => {
    const client = new OpenAIClient(options({ temperature: 0.7, topP: 0.9, maxTokens: 64, stop: ['\n\n'] }));
    const a = await client.complete({ prompt: 'p', n: 3, seed: 11 });
    expect(a.choices.map((c) => c.text)).toEqual(['answer 11 0', 'answer 11 1', 'answer 11 2']);
    expect(a.choices[0]!.tokenIds).toEqual([...Buffer.from('answer 11 0')]);
    expect(a.choices[0]!.tokenLogprobs).toHaveLength('answer 11 0'.length);
    expect(a).toMatchObject({ fingerprint: 'v7', model: 'stand-in', failures: [] });
    expect(server.requests[0]!.body).toEqual({
      model: 'stand-in',
      prompt: 'p',
      n: 3,
      seed: 11,
      temperature: 0.7,
      top_p: 0.9,
      max_tokens: 64,
      stop: ['\n\n'],
      logprobs: 1,
    });
  });

  it.each<[Fault, string]>([
    ['malformed-json', 'malformed-json'],
    ['http-500', 'http-status'],
    ['empty-choices', 'empty-choices'],
    ['wrong-n', 'wrong-n'],
    ['hang', 'timeout'],
    ['bad-shape', 'bad-shape'],
  ])('%s: a recorded failure (%s), then a retry that answers', async (fault, kind) => {
    server.faults = [fault];
    const a = await new OpenAIClient(options()).complete({ prompt: 'p', n: 2, seed: 1 });
    expect(a.choices).toHaveLength(2);
    expect(a.failures).toEqual([
      { attempt: 1, kind, message: expect.any(String), status: kind === 'timeout' ? null : expect.any(Number), retrying: true, delayMs: 5 },
    ]);
    expect(server.requests.map((r) => r.fault)).toEqual([fault, null]);
  });

  it('backs off exponentially up to the cap, every try recorded', async () => {
    server.faults = ['http-500', 'empty-choices', 'wrong-n'];
    const a = await new OpenAIClient(options()).complete({ prompt: 'p', n: 2, seed: 1 });
    expect(a.failures.map((f) => [f.attempt, f.kind, f.delayMs])).toEqual([
      [1, 'http-status', 5],
      [2, 'empty-choices', 10],
      [3, 'wrong-n', 20],
    ]);
  });

  it('gives up after the last try with every failure in the error', async () => {
    server.faults = ['http-500', 'http-500', 'http-500', 'http-500'];
    const err = await new OpenAIClient(options()).complete({ prompt: 'p', n: 1, seed: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRequestError);
    expect((err as ModelRequestError).failures.map((f) => f.retrying)).toEqual([true, true, true, false]);
    expect((err as ModelRequestError).message).toMatch(/4 tries failed; last: http-status: HTTP 500/);
  });

  it("a 400 is the request's fault: no retry", async () => {
    server.faults = ['http-400'];
    const err = await new OpenAIClient(options()).complete({ prompt: 'p', n: 1, seed: 1 }).catch((e: unknown) => e);
    expect((err as ModelRequestError).failures).toHaveLength(1);
    expect(server.requests).toHaveLength(1);
  });

  it('a server that is down is a network failure, retried', async () => {
    const client = new OpenAIClient(OpenAIPolicyOptions.parse({ baseUrl: 'http://127.0.0.1:9/v1', model: 'm', retry: { attempts: 2, baseDelayMs: 1 } }));
    const err = (await client.complete({ prompt: 'p', n: 1, seed: 1 }).catch((e: unknown) => e)) as ModelRequestError;
    expect(err.failures.map((f) => f.kind)).toEqual(['network', 'network']);
  });

  it('chat api: one user message, log-probs from content', async () => {
    const a = await new OpenAIClient(options({ api: 'chat' })).complete({ prompt: 'hello', n: 2, seed: 3 });
    expect(server.requests[0]!.path).toBe('/v1/chat/completions');
    expect(server.requests[0]!.body.messages).toEqual([{ role: 'user', content: 'hello' }]);
    expect(a.choices[1]!.text).toBe('answer 3 1');
    expect(a.choices[1]!.tokenLogprobs).toHaveLength('answer 3 1'.length);
  });

  it('keeps at most `concurrency` requests in flight', async () => {
    const client = new OpenAIClient(options({ concurrency: 2, timeoutMs: 200, retry: { attempts: 2, baseDelayMs: 1 } }));
    server.faults = ['hang', 'hang', 'hang'];
    const all = Promise.all([1, 2, 3].map((seed) => client.complete({ prompt: 'p', n: 1, seed })));
    await new Promise((r) => setTimeout(r, 100));
    // Two hang; the third waits for a slot instead of being sent.
    expect(server.requests).toHaveLength(2);
    const answers = await all;
    expect(answers.map((a) => a.failures.length)).toEqual([1, 1, 1]);
  });
});

const problem: Problem = {
  id: 'demo/add',
  source: 'demo',
  statement: 'Return the sum of a and b.',
  style: 'call',
  entryPoint: 'add',
  tests: { public: [], private: [], generated: [] },
  solutions: ['def add(a, b):\n    return a + b\n'],
  incorrectSolutions: [],
  limits: { timeSeconds: 1, memoryMb: 256 },
  comparison: 'tokens',
  tags: [],
};

describe('OpenAIPolicy', () => {
  it('code role: renders the solve prompt, reads programs, records each sample and the failures once', async () => {
    const s = await StandInOpenAIServer.start(({ n }) => ['```python\ndef add(a, b):\n    return a + b\n```', 'no code here, sorry'].slice(0, n));
    try {
      s.faults = ['malformed-json'];
      const client = new OpenAIClient(OpenAIPolicyOptions.parse({ baseUrl: s.baseUrl, model: 'm', retry: { baseDelayMs: 1 } }));
      const policy = new OpenAIPolicy({ client, role: 'code', method: 'code-a1', problems: new Map([[problem.id, problem]]), suiteSize: 4 });
      const gens = await policy.generate({
        role: 'code',
        version: 2,
        seed: 5,
        n: 2,
        prompts: [{ key: 'demo/add', prompt: problem.statement, context: { problemId: problem.id } }],
      });
      expect(gens.map((g) => g.text)).toEqual(['def add(a, b):\n    return a + b\n', 'no code here, sorry\n']);
      expect(gens[0]!.record).toMatchObject({
        requestId: 'code/v2/demo/add/5',
        template: { id: 'solve', version: 1 },
        prompt: expect.stringContaining('Return the sum of a and b.'),
        seed: 5,
        params: { model: 'm', n: 2, seed: 5, temperature: 1, top_p: 1, max_tokens: 512, logprobs: 1 },
        parse: { status: 'ok', form: 'fenced' },
        failures: [{ attempt: 1, kind: 'malformed-json' }],
      });
      expect(gens[0]!.logprob).toBeCloseTo(gens[0]!.record!.tokenLogprobs!.reduce((a, b) => a + b, 0));
      expect(gens[1]!.record).toMatchObject({ parse: { form: 'bare' }, failures: [] });
    } finally {
      await s.close();
    }
  });

  it('test role: the white-box prompt shows the program; tests come out as test lines, unreadable ones marked', async () => {
    const s = await StandInOpenAIServer.start(() => ['```python\nassert add(1, 2) == 3\nassert add(x, 1) == 2\n```']);
    try {
      const client = new OpenAIClient(OpenAIPolicyOptions.parse({ baseUrl: s.baseUrl, model: 'm' }));
      const policy = new OpenAIPolicy({ client, role: 'test', method: 'code-a1', problems: new Map([[problem.id, problem]]), suiteSize: 4 });
      const [g] = await policy.generate({
        role: 'test',
        version: 0,
        seed: 1,
        n: 1,
        prompts: [{ key: 's1', prompt: '', context: { problemId: problem.id, program: 'def add(a, b):\n    return a - b\n' } }],
      });
      expect(g!.record!.template).toEqual({ id: 'attack-white-box', version: 1 });
      expect(g!.record!.prompt).toContain('return a - b');
      expect(g!.text.split('\n')[0]).toBe('{"args":[1,2],"expected":3,"style":"call"}');
      expect(g!.text.split('\n')[1]).toMatch(/^unparsed: not a literal/);
      expect(g!.record!.parse).toMatchObject({ status: 'partial', usable: 1, found: 2 });
      // Black-box ACE asks for inputs only.
      const ace = new OpenAIPolicy({ client, role: 'test', method: 'ace', problems: new Map([[problem.id, problem]]), suiteSize: 4 });
      const [h] = await ace.generate({ role: 'test', version: 0, seed: 1, n: 1, prompts: [{ key: 's1', prompt: '', context: { problemId: problem.id } }] });
      expect(h!.record!.template).toEqual({ id: 'inputs-black-box', version: 1 });
    } finally {
      await s.close();
    }
  });
});
