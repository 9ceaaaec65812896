/**
 * The catalog policy: one softmax per context over a fixed candidate set, for one role.
 * code role: context = problemId, choices = candidate programs.
 * test role: context = problemId (black-box) or problemId#candidateId (white-box), choices =
 * candidate tests; a generation is a suite of up to k tests drawn without replacement.
 * It is both the PolicyPort and the TrainerPort of that role; its state is plain data.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson } from '../../core/canonical-json.js';
import {
  GenerateRequest,
  PolicyInputError,
  TrainStepRequest,
  VersionError,
  type Generation,
  type PolicyPort,
  type TrainerPort,
  type TrainStepResult,
} from '../port.js';
import type { Role } from '../../core/roles.js';
import { Rng } from '../../core/rng.js';
import type { CandidateKind, CandidateTest, CatalogUniverse } from '../../datasets/demo/catalog/index.js';
import { entropy, logprobGradient, sampleIndex, sampleWithoutReplacement, softmax } from './softmax.js';
import { serializeSuite } from './suite.js';

export type { CatalogUniverse };

export interface CatalogOptions {
  /** Tests per suite for the test role (default 8). */
  suiteSize?: number;
  /** Initial logit per program kind (default 0 for all: uniform). */
  codePrior?: Partial<Record<CandidateKind, number>>;
  /** Older versions kept in memory so generation can still be served for them (default 4). */
  keepVersions?: number;
}

const Logits = z.record(z.string(), z.record(z.string(), z.number()));
type Logits = z.infer<typeof Logits>;

export const CatalogState = z.object({
  role: z.enum(['code', 'test']),
  version: z.number().int().nonnegative(),
  /** Only contexts that were trained; the others are at the prior. */
  logits: Logits,
  /** Idempotency: batchId -> request hash and the result that was returned. */
  applied: z.record(
    z.string(),
    z.object({
      requestHash: z.string(),
      result: z.object({ version: z.number().int(), metrics: z.record(z.string(), z.number()) }),
    }),
  ),
});
export type CatalogState = z.infer<typeof CatalogState>;

export function codeContextKey(problemId: string): string {
  return problemId;
}

export function testContextKey(problemId: string, target?: string | null): string {
  return target ? `${problemId}#${target}` : problemId;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export class CatalogPolicy implements PolicyPort, TrainerPort {
  readonly #universe: CatalogUniverse;
  readonly #opts: Required<Pick<CatalogOptions, 'suiteSize' | 'keepVersions'>> & CatalogOptions;
  #state: CatalogState;
  /** version -> logits, for recent versions (logits objects are never mutated in place). */
  readonly #history = new Map<number, Logits>();

  constructor(
    readonly role: Role,
    universe: CatalogUniverse,
    opts: CatalogOptions = {},
    state?: CatalogState,
  ) {
    this.#universe = universe;
    this.#opts = { suiteSize: 8, keepVersions: 4, ...opts };
    this.#state = state ?? { role, version: 0, logits: {}, applied: {} };
    if (this.#state.role !== role) throw new PolicyInputError(`state is for the ${this.#state.role} role, not ${role}`);
    this.#history.set(this.#state.version, this.#state.logits);
  }

  static fromJSON(json: unknown, universe: CatalogUniverse, opts: CatalogOptions = {}): CatalogPolicy {
    const parsed = CatalogState.safeParse(json);
    if (!parsed.success)
      throw new PolicyInputError(`not a catalog policy state: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    return new CatalogPolicy(parsed.data.role, universe, opts, parsed.data);
  }

  toJSON(): CatalogState {
    return structuredClone(this.#state);
  }

  get version(): number {
    return this.#state.version;
  }

  /** sha256 of the canonical JSON of role, version and logits. */
  paramsHash(): string {
    const { role, version, logits } = this.#state;
    return sha256(canonicalJson({ role, version, logits }));
  }

  async snapshot(): Promise<{ version: number; paramsHash: string }> {
    return { version: this.#state.version, paramsHash: this.paramsHash() };
  }

  /** Choice ids of a context, in catalog order. */
  choices(contextKey: string): string[] {
    const problemId = contextKey.split('#')[0] as string;
    if (this.role === 'code') {
      const programs = this.#universe.programs[problemId];
      if (!programs) throw new PolicyInputError(`no candidate programs for problem ${problemId}`);
      return programs.map((p) => p.candidateId);
    }
    const tests = this.#universe.tests[problemId];
    if (!tests) throw new PolicyInputError(`no candidate tests for problem ${problemId}`);
    return tests.map((t) => t.testId);
  }

  #priorOf(contextKey: string, id: string): number {
    if (this.role !== 'code') return 0;
    const kind = this.#universe.programs[contextKey]?.find((p) => p.candidateId === id)?.kind;
    return kind ? (this.#opts.codePrior?.[kind] ?? 0) : 0;
  }

  #logitsAt(logits: Logits, contextKey: string, ids: readonly string[]): number[] {
    const trained = logits[contextKey];
    return ids.map((id) => trained?.[id] ?? this.#priorOf(contextKey, id));
  }

  /** The current distribution of a context: choice id -> probability. */
  distribution(contextKey: string): Map<string, number> {
    const ids = this.choices(contextKey);
    const probs = softmax(this.#logitsAt(this.#state.logits, contextKey, ids));
    return new Map(ids.map((id, i) => [id, probs[i] as number]));
  }

  async generate(raw: GenerateRequest): Promise<Generation[]> {
    const parsed = GenerateRequest.safeParse(raw);
    if (!parsed.success) throw new PolicyInputError(`bad generate request: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    const req = parsed.data;
    if (req.role !== this.role) throw new PolicyInputError(`this is the ${this.role} policy; the request is for ${req.role}`);
    const logits = this.#history.get(req.version);
    if (!logits) throw new VersionError(this.role, req.version, this.#state.version);
    const out: Generation[] = [];
    for (const prompt of req.prompts) {
      const problemId = prompt.context.problemId;
      if (!problemId) throw new PolicyInputError(`prompt ${prompt.key}: context.problemId is missing`);
      const target = this.role === 'test' ? prompt.context.target : undefined;
      if (target && !this.#universe.programs[problemId]?.some((p) => p.candidateId === target)) {
        throw new PolicyInputError(`prompt ${prompt.key}: unknown target candidate ${target} of ${problemId}`);
      }
      const contextKey = this.role === 'code' ? codeContextKey(problemId) : testContextKey(problemId, target);
      const ids = this.choices(contextKey);
      const values = this.#logitsAt(logits, contextKey, ids);
      for (let index = 0; index < req.n; index++) {
        const rng = Rng.derive(req.seed, this.role, prompt.key, index);
        if (this.role === 'code') {
          const probs = softmax(values);
          const i = sampleIndex(probs, rng);
          const cand = this.#universe.programs[problemId]![i]!;
          out.push({ promptKey: prompt.key, index, text: cand.program, choiceKey: cand.candidateId, contextKey, logprob: Math.log(probs[i]!) });
        } else {
          const { picks, logprob } = sampleWithoutReplacement(values, this.#opts.suiteSize, rng);
          const tests = picks.map((i) => this.#universe.tests[problemId]![i]!);
          out.push({
            promptKey: prompt.key,
            index,
            text: serializeSuite(tests.map((t) => t.test)),
            choiceKey: tests.map((t) => t.testId).join(','),
            contextKey,
            logprob,
          });
        }
      }
    }
    return out;
  }

  /** theta_ctx += lr * sum_i w_i * grad log pi(choice_i | ctx), one step at the pre-step logits.
   * w_i: grpo = advantage; kto = advantage sign times desirableWeight/undesirableWeight; sft = 1. */
  async trainStep(raw: TrainStepRequest): Promise<TrainStepResult> {
    const parsed = TrainStepRequest.safeParse(raw);
    if (!parsed.success) throw new PolicyInputError(`bad train step: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    const req = parsed.data;
    const requestHash = sha256(canonicalJson(req));
    const prior = this.#state.applied[req.batchId];
    if (prior) {
      if (prior.requestHash !== requestHash) throw new PolicyInputError(`batch ${req.batchId} was already applied with different content`);
      return structuredClone(prior.result);
    }
    if (req.role !== this.role) throw new PolicyInputError(`this is the ${this.role} trainer; batch ${req.batchId} is for ${req.role}`);
    if (req.expectedVersion !== this.#state.version) throw new VersionError(this.role, req.expectedVersion, this.#state.version);
    const lr = req.hyper.lr;
    if (lr === undefined || !Number.isFinite(lr)) throw new PolicyInputError(`batch ${req.batchId}: hyper.lr is required`);

    // Compute every gradient before touching the state: a bad sample applies nothing.
    const grads = new Map<string, { ids: string[]; before: number[]; grad: number[] }>();
    let weightSum = 0;
    req.samples.forEach((s, n) => {
      if (s.contextKey === null || s.choiceKey === null)
        throw new PolicyInputError(`batch ${req.batchId}: sample ${n} has no contextKey/choiceKey (not a catalog generation)`);
      let g = grads.get(s.contextKey);
      if (!g) {
        const ids = this.choices(s.contextKey);
        g = { ids, before: this.#logitsAt(this.#state.logits, s.contextKey, ids), grad: ids.map(() => 0) };
        grads.set(s.contextKey, g);
      }
      const picks = s.choiceKey.split(',').map((id) => {
        const i = g!.ids.indexOf(id);
        if (i < 0) throw new PolicyInputError(`batch ${req.batchId}: sample ${n}: ${id} is not a choice of ${s.contextKey}`);
        return i;
      });
      const w = weightOf(req.algorithm, s.advantage, req.hyper);
      weightSum += Math.abs(w);
      const lg = logprobGradient(g.before, picks);
      lg.forEach((v, i) => {
        g!.grad[i] = (g!.grad[i] as number) + w * v;
      });
    });

    const logits: Logits = { ...this.#state.logits };
    let sq = 0;
    let entropySum = 0;
    for (const [ctx, g] of grads) {
      const next = g.before.map((b, i) => b + lr * (g.grad[i] as number));
      g.grad.forEach((v) => {
        sq += v * v;
      });
      logits[ctx] = Object.fromEntries(g.ids.map((id, i) => [id, next[i] as number]));
      entropySum += entropy(softmax(next));
    }
    const version = this.#state.version + 1;
    const result: TrainStepResult = {
      version,
      metrics: {
        samples: req.samples.length,
        contexts: grads.size,
        gradNorm: Math.sqrt(sq),
        meanAbsWeight: req.samples.length ? weightSum / req.samples.length : 0,
        meanEntropy: grads.size ? entropySum / grads.size : 0,
      },
    };
    this.#state = { ...this.#state, version, logits, applied: { ...this.#state.applied, [req.batchId]: { requestHash, result } } };
    this.#history.set(version, logits);
    for (const v of this.#history.keys()) if (v <= version - this.#opts.keepVersions) this.#history.delete(v);
    return structuredClone(result);
  }
}

function weightOf(algorithm: 'grpo' | 'kto' | 'sft', advantage: number, hyper: Record<string, number>): number {
  if (algorithm === 'grpo') return advantage;
  if (algorithm === 'sft') return 1;
  if (advantage > 0) return hyper.desirableWeight ?? 1;
  if (advantage < 0) return -(hyper.undesirableWeight ?? 1);
  return 0;
}
