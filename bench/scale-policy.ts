/**
 * What `bench scale` runs on instead of a dataset and a model: generated problems and a seeded
 * stand-in policy (SeededStandInPolicyForBenchmark) that draws a fresh program or a fresh
 * suite of tests at every sample, as a model sampling at temperature would, so the run's
 * verdicts are executed rather than reused. It learns nothing: a training step only moves the
 * version on. Both exist only for the benchmark.
 */
import type { Problem } from '../src/core/problem.js';
import { Rng } from '../src/core/rng.js';
import type { Role } from '../src/core/roles.js';
import type { PreparedRun } from '../src/actors/sources.js';
import type { LearnerTrainer, PolicyBackend, SamplingPolicy } from '../src/actors/env.js';
import type { GenerateRequest, Generation, TrainStepRequest, TrainStepResult } from '../src/policies/port.js';
import { VersionError } from '../src/policies/port.js';

/** Stdio problems: read an integer, print a linear function of it. Two held-out tests each. */
export function generatedProblems(count: number, seed: number): Problem[] {
  const out: Problem[] = [];
  for (let i = 0; i < count; i++) {
    const rng = Rng.derive(seed, 'bench-scale-problem', i);
    const a = 2 + rng.int(7);
    const b = rng.int(100);
    const f = (x: number) => a * x + b;
    const test = (x: number) => ({ style: 'stdio' as const, input: `${x}\n`, output: `${f(x)}\n` });
    out.push({
      id: `scale/p${String(i).padStart(4, '0')}`,
      source: 'bench-scale',
      statement: `Read an integer x and print ${a}*x + ${b}.`,
      style: 'stdio',
      tests: { public: [test(1)], private: [test(rng.int(1000)), test(rng.int(1000))], generated: [] },
      solutions: [`x = int(input())\nprint(${a} * x + ${b})\n`],
      incorrectSolutions: [`x = int(input())\nprint(${a} * x + ${b + 1})\n`],
      limits: { timeSeconds: 2, memoryMb: 256 },
      comparison: 'tokens',
      tags: [],
    });
  }
  return out;
}

const paramsOf = (text: string): { role: Role; version: number } => JSON.parse(text) as { role: Role; version: number };

/** Fresh samples per (seed, prompt, index): programs that differ in a constant, suites of
 * `suiteSize` stdio tests that state an expected output (right or wrong: the reference decides). */
class StandInSampler implements SamplingPolicy {
  readonly temperature = 1;
  constructor(
    readonly name: string,
    readonly role: Role,
  ) {}

  async generate(req: GenerateRequest): Promise<Generation[]> {
    const out: Generation[] = [];
    for (const p of req.prompts) {
      for (let index = 0; index < req.n; index++) {
        const rng = Rng.derive(req.seed, p.key, index);
        let text: string;
        if (this.role === 'code') {
          text = `x = int(input())\nprint(x * ${1 + rng.int(9)} + ${rng.int(1_000_000)})\n`;
        } else {
          const size = Number(p.context.suiteSize ?? '8');
          const lines: string[] = [];
          for (let t = 0; t < size; t++) lines.push(JSON.stringify({ style: 'stdio', input: `${rng.int(1_000_000)}\n`, output: `${rng.int(10_000_000)}\n` }));
          text = lines.join('\n');
        }
        out.push({ promptKey: p.key, index, text, choiceKey: null, contextKey: null, logprob: null });
      }
    }
    return out;
  }
}

class StandInTrainer implements LearnerTrainer {
  #version: number;
  constructor(
    readonly name: string,
    readonly role: Role,
    version: number,
  ) {
    this.#version = version;
  }

  async trainStep(req: TrainStepRequest): Promise<TrainStepResult> {
    if (req.expectedVersion !== this.#version) throw new VersionError(req.role, req.expectedVersion, this.#version);
    this.#version++;
    return { version: this.#version, metrics: { samples: req.samples.length } };
  }

  async snapshot(): Promise<{ version: number; params: string }> {
    return { version: this.#version, params: JSON.stringify({ role: this.role, version: this.#version }) };
  }
}

export class SeededStandInPolicyForBenchmark implements PolicyBackend {
  readonly name = 'stand-in';
  readonly exactBasis = null;

  initialParams(role: Role): string {
    return JSON.stringify({ role, version: 0 });
  }

  evaluate(): never {
    throw new Error('the stand-in policy has no exact figures (exactBasis is null)');
  }

  sampler(role: Role, _params: string, _version: number): SamplingPolicy {
    return new StandInSampler(`stand-in-${role}`, role);
  }

  trainer(role: Role, params: string, _version: number): LearnerTrainer {
    return new StandInTrainer(`stand-in-${role}`, role, paramsOf(params).version);
  }
}

export function standInRun(problems: number, seed: number): PreparedRun {
  return { problems: generatedProblems(problems, seed), backend: new SeededStandInPolicyForBenchmark(), catalogHash: null };
}
