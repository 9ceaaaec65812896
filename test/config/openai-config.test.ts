/** Picking the openai policy backend in a run config, and the errors that name what is wrong. */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.js';

const openai = { baseUrl: 'http://127.0.0.1:8000/v1', model: 'toy-policy' };
const both = (o: Record<string, unknown> = openai) => ({ code: { backend: 'openai', openai: o }, test: { backend: 'openai', openai: o } });

describe('policies.*.backend: openai', () => {
  it('fills every sampling, concurrency, timeout and retry default', () => {
    const c = parseConfig({ policies: both(), learner: { control: 'frozen' } });
    expect(c.policies.code.openai).toEqual({
      baseUrl: 'http://127.0.0.1:8000/v1',
      model: 'toy-policy',
      api: 'completions',
      prompts: 'full',
      temperature: 1,
      topP: 1,
      maxTokens: 512,
      stop: [],
      logprobs: true,
      concurrency: 4,
      timeoutMs: 120_000,
      retry: { attempts: 5, baseDelayMs: 250, maxDelayMs: 8000 },
    });
  });

  it('refuses a baseUrl missing without learner.bridge.serve, or given with it; reload beside weightSync; sft without a bridge', () => {
    const { baseUrl: _b, ...noUrl } = { baseUrl: 'x', model: 'toy-policy' };
    expect(() => parseConfig({ policies: both(noUrl), learner: { control: 'frozen' } })).toThrow(
      /policies\.code\.openai\.baseUrl.*required unless the run starts its own servers/,
    );
    expect(() => parseConfig({ policies: both(), learner: { bridge: { serve: {} } } })).toThrow(/policies\.code\.openai\.baseUrl.*leave baseUrl out/);
    expect(parseConfig({ policies: both(noUrl), learner: { bridge: { serve: {} } } }).learner.bridge?.serve).toEqual({ threads: 1 });
    expect(() => parseConfig({ policies: both(), learner: { bridge: { reload: { adminTokenEnv: 'T' }, weightSync: { kind: 'sglang' } } } })).toThrow(
      /learner\.bridge\.weightSync.*not both/,
    );
    expect(() => parseConfig({ policies: both(), learner: { bridge: { weightSync: { kind: 'vllm' } } } })).toThrow(/learner\.bridge\.weightSync/);
    expect(() => parseConfig({ policies: both(), learner: { control: 'frozen', sft: { steps: 2 } } })).toThrow(/learner\.sft.*needs learner\.bridge/);
  });

  it('records the warm start every 10 steps unless learner.sft.record says otherwise, and refuses a record of no steps', () => {
    const sft = (record?: unknown) => parseConfig({ policies: both(), learner: { bridge: {}, sft: { steps: 20, ...(record ? { record } : {}) } } }).learner.sft;
    expect(sft()?.record).toEqual({ steps: 10 });
    expect(sft({ steps: 25, seconds: 30 })?.record).toEqual({ steps: 25, seconds: 30 });
    expect(() => sft({ steps: 0 })).toThrow(/learner\.sft\.record\.steps/);
    expect(() => sft({ every: 5 })).toThrow(/learner\.sft\.record/);
  });

  it('the catalog default is unchanged', () => {
    const c = parseConfig({});
    expect(c.policies.code.backend).toBe('catalog');
    expect(c.policies.code.openai).toBeUndefined();
  });

  it.each([
    [
      { policies: { code: { backend: 'openai' }, test: { backend: 'openai' } }, learner: { control: 'frozen' } },
      /policies\.code\.openai.*needs an openai section/,
    ],
    [{ policies: both(), learner: { control: 'none' } }, /learner\.control.*set learner\.control: frozen/],
    [{ policies: { code: { backend: 'openai', openai }, test: {} }, learner: { control: 'frozen' } }, /policies\.test\.backend.*one backend/],
    [{ policies: { code: { openai } } }, /policies\.code\.openai.*only read with backend openai/],
    [{ policies: both({ ...openai, baseUrl: 'not a url' }), learner: { control: 'frozen' } }, /policies\.code\.openai\.baseUrl/],
    [{ policies: both({ ...openai, temprature: 0.5 }), learner: { control: 'frozen' } }, /temprature/],
    [{ policies: both({ ...openai, retry: { attempts: 0 } }), learner: { control: 'frozen' } }, /retry\.attempts/],
  ])('refuses %j with an error that says where', (raw, message) => {
    expect(() => parseConfig(raw)).toThrow(ConfigError);
    expect(() => parseConfig(raw)).toThrow(message);
  });
});

describe('configs/served-toy.yaml', () => {
  it('loads: both roles served over openai, trained through a toy gpu-bridge that reloads the servers', async () => {
    const { loadConfigFile } = await import('../../src/config/load.js');
    const c = loadConfigFile('configs/served-toy.yaml');
    expect(c.policies.code.openai?.baseUrl).toBe('http://127.0.0.1:8001/v1');
    expect(c.policies.test.openai?.baseUrl).toBe('http://127.0.0.1:8002/v1');
    expect(c.learner.bridge).toMatchObject({ backend: 'toy', reload: { adminTokenEnv: 'GPU_BRIDGE_ADMIN_TOKEN' } });
    expect(c.learner.control).toBe('none');
  });
});
