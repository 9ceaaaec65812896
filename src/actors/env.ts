/**
 * What effect runners may touch: the blob store, the sandbox, the problems, the policies and
 * trainers, and a seed source. Machines never see this; only effect runners do.
 */
import type { BlobStore } from '../events/log.js';
import type { NewEvent, EventEnvelope } from '../events/envelope.js';
import type { EventData, EventDataInput, EventType } from '../events/catalog.js';
import { Problem, TestCase } from '../core/problem.js';
import { canonicalJson } from '../core/canonical-json.js';
import type { Sandbox } from '../sandbox/api.js';
import type { Role } from '../core/roles.js';
import type { RunConfig } from '../config/schema.js';
import type { GenerateRequest, Generation, TrainStepRequest, TrainStepResult } from '../policies/port.js';
import { deriveSeed } from '../core/rng.js';
import { FifoCache } from '../core/fifo-cache.js';
import type { WeightSyncRecord } from '../policies/weight-sync.js';
import type { RuntimeView } from './runtime.js';

export interface SamplingPolicy {
  readonly name: string;
  readonly temperature: number | null;
  generate(request: GenerateRequest): Promise<Generation[]>;
}

export interface LearnerTrainer {
  readonly name: string;
  /** The version it holds, where it can tell without a snapshot (absent: ask snapshot()). */
  readonly version?: number;
  trainStep(request: TrainStepRequest): Promise<TrainStepResult>;
  /** Version and serialized parameters (stored as a blob: the checkpoint); for a served
   * policy, the weight sync that loaded this version into its server. */
  snapshot(): Promise<{ version: number; params: string; synced?: WeightSyncRecord }>;
  /** The same checkpoint without the weight sync: a point to resume training from (the warm
   * start's), not a version to sample. Absent: the trainer cannot resume mid-way. */
  checkpoint?(): Promise<{ version: number; params: string }>;
}

/** Trained checkpoints shared by the runs of one folder (the warm start's cache, see
 * warm-start.ts), for backends whose trainers publish checkpoints. */
export interface WarmStartCache {
  /** What besides the rows and the step settings determines a role's trained weights (the
   * model, the trainer's options and code): part of the cache key. */
  identity(role: Role): Promise<Record<string, unknown>>;
  /** The parameters of the entry under `key`, its checkpoint's files put into the run's blob
   * store; null when there is none. */
  get(key: string, role: Role): Promise<{ version: number; params: string } | null>;
  /** Keeps the checkpoint these parameters name as the entry under `key`, `about` beside it. */
  put(key: string, role: Role, params: string, about: Record<string, unknown>): Promise<void>;
}

/** Exact per-problem figures of a pair of policies (what the sampled figures estimate). */
export interface PolicyFigures {
  problemId: string;
  /** Probability that the code policy samples a correct program. */
  correct: number;
  /** Probability that a test drawn from the test policy is valid (the reference accepts it). */
  validTest: number;
}

/** A policy family: how to sample from given parameters and how to train them. */
export interface PolicyBackend {
  readonly name: string;
  /** How `evaluate` knows its figures (e.g. "catalog": softmax and labelled candidates); null
   * when the backend cannot compute them (a model server: only sampled figures exist). */
  readonly exactBasis: 'catalog' | null;
  initialParams(role: Role): string;
  /** Exact figures of the policies with these parameters, per problem (only when exactBasis). */
  evaluate(params: Record<Role, string>, problemIds: readonly string[], whiteBox: boolean): PolicyFigures[];
  sampler(role: Role, params: string, version: number): SamplingPolicy;
  trainer(role: Role, params: string, version: number): LearnerTrainer;
  /** Release what the backend started (a trainer process), at the end of the run. */
  close?(): Promise<void>;
  /** Where warm starts are kept between runs; absent: every run computes its own. */
  readonly warmStartCache?: WarmStartCache;
}

export class RunEnv {
  readonly runId: string;
  readonly config: RunConfig;
  readonly blobs: BlobStore;
  readonly sandbox: Sandbox;
  readonly backend: PolicyBackend;
  /** Problems read so far, by id. */
  readonly #problems = new Map<string, Problem>();
  /** problemId -> blob of its record, from RunStarted: where every process reads the problems. */
  readonly #problemHashes = new Map<string, string>();
  readonly #reading = new Map<string, Promise<Problem>>();
  /** role/version -> checkpoint blob, from PolicyVersionPublished and WarmStartCheckpointed. */
  readonly #checkpoints = new Map<string, string>();
  readonly #trainers = new Map<Role, { version: number; trainer: LearnerTrainer }>();
  readonly #samplers = new Map<string, SamplingPolicy>();

  /** `problems`: records already read from this run's blobs (an ablation that read them);
   * the others are read from the blob store when first needed. */
  constructor(opts: { runId: string; config: RunConfig; blobs: BlobStore; sandbox: Sandbox; backend: PolicyBackend; problems?: readonly Problem[] }) {
    this.runId = opts.runId;
    this.config = opts.config;
    this.blobs = opts.blobs;
    this.sandbox = opts.sandbox;
    this.backend = opts.backend;
    for (const p of opts.problems ?? []) this.#problems.set(p.id, p);
  }

  /** Fed by the runtime: where each policy version's parameters are. */
  readonly view: RuntimeView = {
    types: ['RunStarted', 'PolicyVersionPublished', 'WarmStartCheckpointed'],
    observe: (envelope: EventEnvelope): void => {
      if (envelope.type === 'RunStarted') {
        if (envelope.runId !== this.runId) return;
        for (const ref of (envelope.data as EventData<'RunStarted'>).problems) this.#problemHashes.set(ref.problemId, ref.problemHash);
        return;
      }
      const d = envelope.data as { policy: { role: Role; version: number }; checkpoint: string | null };
      if (d.checkpoint) this.#checkpoints.set(`${d.policy.role}/${d.policy.version}`, d.checkpoint);
    },
  };

  /** An event of this run, typed here and validated once, when the runtime appends it (the
   * error then names the actor, the effect's commit and the field). */
  event<T extends EventType>(type: T, data: EventDataInput<T>): NewEvent {
    return { type, runId: this.runId, data };
  }

  /** The run's problems, in RunStarted's order, each read as `problem` reads it. */
  async allProblems(): Promise<Problem[]> {
    return Promise.all([...this.#problemHashes.keys()].map((id) => this.problem(id)));
  }

  /** A problem of the run, as recorded: read by hash from the blob store (RunStarted names each
   * problem's blob), never from a local dataset, so any process with the log can run any actor. */
  async problem(id: string): Promise<Problem> {
    const known = this.#problems.get(id);
    if (known) return known;
    let reading = this.#reading.get(id);
    if (!reading) {
      reading = this.#read(id);
      this.#reading.set(id, reading);
      reading.catch(() => this.#reading.delete(id));
    }
    return reading;
  }

  async #read(id: string): Promise<Problem> {
    const hash = this.#problemHashes.get(id);
    if (!hash) throw new Error(`problem ${id} is not among the problems recorded in the RunStarted of run ${this.runId}`);
    const text = await this.blobs.getText(hash);
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw new Error(`problem ${id}: its recorded blob ${hash.slice(0, 12)} is not JSON`);
    }
    const parsed = Problem.safeParse(raw);
    if (!parsed.success)
      throw new Error(
        `problem ${id}: its recorded blob ${hash.slice(0, 12)} is not a problem record (${parsed.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`).join('; ')})`,
      );
    if (parsed.data.id !== id) throw new Error(`problem ${id}: its recorded blob ${hash.slice(0, 12)} holds problem ${parsed.data.id}`);
    this.#problems.set(id, parsed.data);
    return parsed.data;
  }

  /** The canonical text of a problem record, as RunStarted stores it (the blob's content). */
  static problemBlob(problem: Problem): string {
    return canonicalJson(problem);
  }

  /** Parsed test blobs (content-addressed, so never stale), a bounded number: the Judge reads
   * each sampled test for the oracle, again for validity and again for the Mistake Book. */
  readonly #tests = new FifoCache<string, TestCase>();

  /** The test stored under `hash`, parsed and checked once; callers must not mutate it. */
  async test(hash: string): Promise<TestCase> {
    return this.#tests.get(hash) ?? this.#keepTest(hash, await this.blobs.getText(hash));
  }

  /** Notes a test blob this process just put (`canonical` is its text, `hash` what put
   * returned), parsed as `test` would parse it: its readers need not read it back. */
  rememberTest(hash: string, canonical: string): void {
    if (!this.#tests.has(hash)) this.#keepTest(hash, canonical);
  }

  /** The same for a text that is the canonical JSON of a test TestCase has just accepted (the
   * Adversary's parsed lines): read back as it is, not checked a second time. */
  rememberCheckedTest(hash: string, canonical: string): void {
    if (!this.#tests.has(hash)) this.#keepTest(hash, canonical, true);
  }

  #keepTest(hash: string, text: string, checked = false): TestCase {
    const t = checked ? (JSON.parse(text) as TestCase) : TestCase.parse(JSON.parse(text));
    // A step's sampled and corrected tests (Code-A1 shape: ~200k) stay until they are run.
    if (this.#tests.size >= 262_144) this.#tests.shift();
    this.#tests.set(hash, t);
    return t;
  }

  /** A seed for one effect, independent of every other effect's. */
  seed(...labels: (string | number)[]): number {
    return deriveSeed(this.config.seed, ...labels.map(String));
  }

  async #params(role: Role, version: number): Promise<string> {
    const hash = this.#checkpoints.get(`${role}/${version}`);
    if (!hash) throw new Error(`no checkpoint recorded for the ${role} policy at version ${version}`);
    return this.blobs.getText(hash);
  }

  async policy(role: Role, version: number): Promise<SamplingPolicy> {
    const k = `${role}/${version}`;
    let p = this.#samplers.get(k);
    if (!p) {
      p = this.backend.sampler(role, await this.#params(role, version), version);
      this.#samplers.set(k, p);
      // Keep only recent versions: old ones are never sampled again.
      for (const old of this.#samplers.keys()) if (old.startsWith(`${role}/`) && Number(old.split('/')[1]) < version - 1) this.#samplers.delete(old);
    }
    return p;
  }

  /** The trainer of a role; with `atVersion`, restored from that version's checkpoint when the
   * one in memory is elsewhere (after a restart), or fresh at version 0 when none is recorded
   * (a warm start's first steps, tried again). Without it: the one held, else a fresh one. */
  async trainer(role: Role, atVersion?: number): Promise<LearnerTrainer> {
    const held = this.#trainers.get(role);
    const fresh = () => {
      const trainer = this.backend.trainer(role, this.backend.initialParams(role), 0);
      this.#trainers.set(role, { version: 0, trainer });
      return trainer;
    };
    if (atVersion === undefined) return held ? held.trainer : fresh();
    if (held && (held.trainer.version ?? (await held.trainer.snapshot()).version) === atVersion) return held.trainer;
    if (atVersion === 0 && !this.#checkpoints.has(`${role}/0`)) return fresh();
    const trainer = this.backend.trainer(role, await this.#params(role, atVersion), atVersion);
    this.#trainers.set(role, { version: atVersion, trainer });
    return trainer;
  }
}
