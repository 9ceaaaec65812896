/**
 * A policy sampled from an OpenAI-compatible server. For each prompt it renders the method's
 * template for the role from the problem, asks for n choices in one request (retried as a
 * whole, so a group is never half recorded or doubled), reads each answer (program or tests) and
 * returns it with a SampleRecord: prompt, template, raw answer, parameters, seed, tokens,
 * log-probs, parse outcome and the failed tries.
 *
 * The text handed to the actors is what they run: the program for the code role; for the test
 * role one line per test as JSON of the problem's style (the actors' test-line format), and an
 * `unparsed: reason` line per test that could not be read, so it counts as a malformed test.
 */
import { deriveSeed } from '../../core/rng.js';
import { canonicalJson } from '../../core/canonical-json.js';
import type { Problem } from '../../core/problem.js';
import type { Role } from '../../core/roles.js';
import { PolicyInputError, type GenerateRequest, type Generation, type PolicyPort } from '../port.js';
import type { OpenAIClient } from './http.js';
import { parseProgram, parseTests } from './parse.js';
import { renderPrompt, templateFor } from './prompts.js';

export interface OpenAIPolicyInit {
  client: OpenAIClient;
  role: Role;
  /** The run's method: picks the test prompt (ACE asks for inputs only). */
  method: string;
  problems: ReadonlyMap<string, Problem>;
  /** Tests per suite asked for (every test of an answer is kept). */
  suiteSize: number;
  /** The model name this policy's requests ask for, when not the client's (a version's adapter). */
  model?: string;
}

export class OpenAIPolicy implements PolicyPort {
  readonly name: string;
  readonly temperature: number;

  constructor(readonly init: OpenAIPolicyInit) {
    this.name = `openai:${init.client.options.model}`;
    this.temperature = init.client.options.temperature;
  }

  async generate(req: GenerateRequest): Promise<Generation[]> {
    const groups = await Promise.all(req.prompts.map((p) => this.#one(req, p, req.prompts.length === 1 ? req.seed : deriveSeed(req.seed, p.key))));
    return groups.flat();
  }

  async #one(req: GenerateRequest, p: GenerateRequest['prompts'][number], seed: number): Promise<Generation[]> {
    const { role, suiteSize, method, client } = this.init;
    const problemId = p.context.problemId;
    if (!problemId) throw new PolicyInputError(`prompt ${p.key}: context.problemId is missing`);
    const problem = this.init.problems.get(problemId);
    if (!problem) throw new PolicyInputError(`prompt ${p.key}: problem ${problemId} is not in this run's dataset`);
    const program = p.context.program;
    const t = templateFor(method, role, role === 'test' && program !== undefined, client.options.prompts);
    const prompt = renderPrompt(t, {
      statement: problem.statement,
      style: problem.style,
      entryPoint: problem.entryPoint,
      starterCode: problem.starterCode,
      suiteSize,
      program,
    });
    const model = this.init.model !== undefined ? { model: this.init.model } : {};
    const answer = await client.complete({ prompt: prompt.text, n: req.n, seed, ...model });
    const { prompt: _p, messages: _m, ...params } = client.body({ prompt: '', n: req.n, seed, ...model });
    return answer.choices.map((c, index) => {
      let text: string;
      let parse;
      if (role === 'code') {
        const read = parseProgram(c.text);
        text = read.program;
        parse = read.outcome;
      } else {
        const read = parseTests(c.text, problem.style, problem.entryPoint, { inputsOnly: method === 'ace' });
        text = read.tests.map((x) => (x.ok ? canonicalJson(x.test) : `unparsed: ${x.reason}`.replace(/\n/g, ' '))).join('\n');
        parse = read.outcome;
      }
      const logprob = c.tokenLogprobs ? c.tokenLogprobs.reduce((s, x) => s + x, 0) : null;
      return {
        promptKey: p.key,
        index,
        text,
        choiceKey: null,
        contextKey: null,
        logprob,
        record: {
          requestId: `${role}/v${req.version}/${p.key}/${seed}`,
          template: { id: prompt.templateId, version: prompt.templateVersion },
          prompt: prompt.text,
          response: c.text,
          params,
          seed,
          served: { model: answer.model, fingerprint: answer.fingerprint },
          finishReason: c.finishReason,
          tokenIds: c.tokenIds,
          tokenLogprobs: c.tokenLogprobs,
          parse,
          failures: index === 0 ? answer.failures : [],
        },
      };
    });
  }
}
