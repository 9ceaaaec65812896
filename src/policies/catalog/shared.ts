/**
 * One catalog policy for both roles (CURE and ACE train one model as coder and tester): the code
 * and test softmaxes live in one parameter set with one version. A training step of either role
 * moves the shared version by one, so the two roles always sample from the same version stream.
 * The roles' logits are disjoint (different contexts and choices), as a model's role prompts are
 * different inputs to one set of weights.
 */
import { z } from 'zod';
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
import { CatalogPolicy, CatalogState, type CatalogOptions, type CatalogUniverse } from './model.js';

export const SharedCatalogState = z.object({
  shared: z.literal(true),
  version: z.number().int().nonnegative(),
  code: CatalogState,
  test: CatalogState,
  /** Idempotency: batchId -> the shared version its step made and its metrics. */
  applied: z.record(z.string(), z.object({ version: z.number().int().positive(), metrics: z.record(z.string(), z.number()) })),
});
export type SharedCatalogState = z.infer<typeof SharedCatalogState>;

export class SharedCatalogPolicy implements PolicyPort, TrainerPort {
  readonly #roles: Record<Role, CatalogPolicy>;
  #version: number;
  #applied: SharedCatalogState['applied'];

  constructor(universe: CatalogUniverse, opts: CatalogOptions = {}, state?: SharedCatalogState) {
    this.#roles = {
      code: state ? CatalogPolicy.fromJSON(state.code, universe, opts) : new CatalogPolicy('code', universe, opts),
      test: state ? CatalogPolicy.fromJSON(state.test, universe, opts) : new CatalogPolicy('test', universe, opts),
    };
    this.#version = state?.version ?? 0;
    this.#applied = { ...(state?.applied ?? {}) };
  }

  static fromJSON(json: unknown, universe: CatalogUniverse, opts: CatalogOptions = {}): SharedCatalogPolicy {
    const parsed = SharedCatalogState.safeParse(json);
    if (!parsed.success)
      throw new PolicyInputError(`not a shared catalog policy state: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    return new SharedCatalogPolicy(universe, opts, parsed.data);
  }

  toJSON(): SharedCatalogState {
    return { shared: true, version: this.#version, code: this.#roles.code.toJSON(), test: this.#roles.test.toJSON(), applied: structuredClone(this.#applied) };
  }

  get version(): number {
    return this.#version;
  }

  /** The softmax of one role, for exact figures. */
  role(role: Role): CatalogPolicy {
    return this.#roles[role];
  }

  async snapshot(): Promise<{ version: number; paramsHash: string }> {
    return { version: this.#version, paramsHash: `${this.#roles.code.paramsHash()}:${this.#roles.test.paramsHash()}` };
  }

  /** Only the current version is held: a sampler is made from the checkpoint of its version. */
  async generate(raw: GenerateRequest): Promise<Generation[]> {
    const parsed = GenerateRequest.safeParse(raw);
    if (!parsed.success) throw new PolicyInputError(`bad generate request: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    const req = parsed.data;
    if (req.version !== this.#version) throw new VersionError(req.role, req.version, this.#version);
    const inner = this.#roles[req.role];
    return inner.generate({ ...req, version: inner.version });
  }

  async trainStep(raw: TrainStepRequest): Promise<TrainStepResult> {
    const parsed = TrainStepRequest.safeParse(raw);
    if (!parsed.success) throw new PolicyInputError(`bad train step: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    const req = parsed.data;
    // A batch applied before returns what it returned (a retried commit), nothing is applied twice.
    const done = this.#applied[req.batchId];
    if (done !== undefined) return structuredClone(done);
    if (req.expectedVersion !== this.#version) throw new VersionError(req.role, req.expectedVersion, this.#version);
    const inner = this.#roles[req.role];
    const result = await inner.trainStep({ ...req, expectedVersion: inner.version });
    this.#version += 1;
    this.#applied[req.batchId] = { version: this.#version, metrics: result.metrics };
    return { version: this.#version, metrics: result.metrics };
  }
}
