/**
 * The warm start (learner.sft): supervised steps on the problems' known programs and public
 * tests before round 1, one role after the other. It runs as a chain of the Learner's effects,
 * each a chunk of steps (learner.sft.record: so many steps, or fewer once so many seconds have
 * passed) whose output is one commit: each step's TrainingBatchFormed and TrainingStepCompleted
 * (round 0, batch id `<run>/sft/<step>/<role>`, the loss in its metrics), then a
 * WarmStartCheckpointed naming the trainer's checkpoint (weights and optimizer state) after the
 * chunk's last step. The next chunk goes on from the last one recorded: with the trainer in
 * memory, or after a restart from that checkpoint; and step s trains the rows of step s whatever
 * step a process started from (the batch order is derived from the seed and the step), so a run
 * stopped anywhere ends at the checkpoint an unstopped run ends at.
 *
 * The last step's checkpoint is kept in the runs' warm-start cache (the backend's, see
 * WarmStartCache in env.ts) under a key derived from everything that determines it; a chunk whose
 * key has an entry takes it instead of training, and says so (cached: true). The key's parts are
 * a blob the events name. Once every role is warm the Learner publishes the versions round 1
 * samples (the `init` effect).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { NewEvent, EventEnvelope } from '../events/envelope.js';
import type { EventData } from '../events/catalog.js';
import type { RunConfig } from '../config/schema.js';
import type { TrainSample } from '../policies/port.js';
import { sftRows, type SftRow } from '../policies/openai/sft.js';
import { canonicalJson } from '../core/canonical-json.js';
import { Rng } from '../core/rng.js';
import { Role } from '../core/roles.js';
import type { RunEnv } from './env.js';
import type { RuntimeView } from './runtime.js';
import { configOf } from './events.js';

/** Part of every cache key: bumped when how rows are batched or steps are taken changes. */
export const WARM_START_FORMAT = 1;

/** What the Learner's machine keeps of the warm start (a field of its context). */
export const WarmStartState = z.strictObject({
  /** The roles to warm up, in order, and their steps ([]: no warm start). */
  plan: z.array(z.strictObject({ role: Role, steps: z.int().positive() })),
  /** Per role: the step and the trainer's version at its last recorded checkpoint. */
  at: z.record(z.string(), z.strictObject({ step: z.int().nonnegative(), version: z.int().nonnegative() })),
});
export type WarmStartState = z.infer<typeof WarmStartState>;

export const NO_WARM_START: WarmStartState = { plan: [], at: {} };

type Sft = NonNullable<RunConfig['learner']['sft']>;

const stepsOf = (sft: Sft, role: Role) => (typeof sft.steps === 'number' ? sft.steps : sft.steps[role]);

/** The plan a run's config makes (folded from its RunStarted). */
export function warmStartPlan(config: RunConfig): WarmStartState {
  const sft = config.learner.sft;
  return sft ? { plan: sft.roles.map((role) => ({ role, steps: stepsOf(sft, role) })), at: {} } : NO_WARM_START;
}

export function foldWarmStartCheckpoint(state: WarmStartState, d: EventData<'WarmStartCheckpointed'>): WarmStartState {
  return { ...state, at: { ...state.at, [d.role]: { step: d.step, version: d.policy.version } } };
}

export type WarmStartEffect = { key: string; kind: 'sft'; role: Role; step: number; version: number };

/** The next chunk: of the first role in the plan not yet warm, from its last recorded step. */
export function warmStartPending(state: WarmStartState): WarmStartEffect | null {
  for (const { role, steps } of state.plan) {
    const at = state.at[role] ?? { step: 0, version: 0 };
    if (at.step < steps) return { key: `sft/${role}/${at.step}`, kind: 'sft', role, step: at.step, version: at.version };
  }
  return null;
}

/** The version each warmed role ends at (what round 1 samples); call once none is pending. */
export function warmVersions(state: WarmStartState): Partial<Record<Role, number>> {
  return Object.fromEntries(state.plan.map(({ role }) => [role, state.at[role]!.version]));
}

/**
 * The rows of step `step` (from 1): seeded passes over all rows, min(batchSize, rows) at a time,
 * each pass a new shuffle drawn from one generator in turn. Computed from the seed and the step
 * alone (the passes before are drawn again, which costs microseconds), so a resumed warm start
 * trains the batches an unstopped one would.
 */
export function sftBatch<T>(rows: readonly T[], seed: number, batchSize: number, step: number): T[] {
  const size = Math.min(batchSize, rows.length);
  const first = (step - 1) * size;
  const rng = Rng.derive(seed, 'order');
  const firstPass = Math.floor(first / rows.length);
  let order: T[] = [];
  for (let pass = 0; pass <= firstPass; pass++) order = rng.shuffle(rows);
  let at = first - firstPass * rows.length;
  const batch: T[] = [];
  while (batch.length < size) {
    if (at === rows.length) {
      order = rng.shuffle(rows);
      at = 0;
    }
    batch.push(order[at++]!);
  }
  return batch;
}

async function rowsOf(env: RunEnv, role: Role): Promise<SftRow[]> {
  const opts = {
    method: env.config.method,
    whiteBox: env.config.sampling.whiteBox,
    suiteSize: env.config.sampling.suiteSize,
    prompts: env.config.policies[role].openai?.prompts ?? 'full',
  };
  const rows = (await env.allProblems()).flatMap((p) => sftRows(p, role, opts));
  if (rows.length === 0) throw new Error(`learner.sft: the ${role} role has no row to train on (no known program or public test with an expected value)`);
  return rows;
}

/** One chunk of a role's warm start (or the cache's entry for it); its events. */
export async function runWarmStartChunk(env: RunEnv, effect: WarmStartEffect): Promise<NewEvent[]> {
  const sft = env.config.learner.sft!;
  const { role } = effect;
  const steps = stepsOf(sft, role);
  const rows = await rowsOf(env, role);
  const seed = env.seed('sft', role);
  const cache = env.backend.warmStartCache;
  // Everything the last step's checkpoint depends on: the trainer (model, options, code), the
  // rows, how they are batched, and the step settings.
  const parts = {
    format: WARM_START_FORMAT,
    role,
    rows: createHash('sha256').update(canonicalJson(rows)).digest('hex'),
    steps,
    batchSize: sft.batchSize,
    lr: sft.lr,
    seed,
    trainer: cache ? await cache.identity(role) : null,
  };
  const key = await env.blobs.put(canonicalJson(parts));
  const checkpointed = async (step: number, name: string, cp: { version: number; params: string }, cached: boolean) =>
    env.event('WarmStartCheckpointed', {
      role,
      step,
      steps,
      policy: { role, name, version: cp.version },
      checkpoint: await env.blobs.put(cp.params),
      key,
      cached,
    });

  const hit = cache ? await cache.get(key, role) : null;
  if (hit) return [await checkpointed(steps, env.backend.trainer(role, hit.params, hit.version).name, hit, true)];

  const trainer = await env.trainer(role, effect.version);
  if (!trainer.checkpoint)
    throw new Error(`learner.sft: the ${role} trainer (${trainer.name}) cannot checkpoint mid-way; the warm start needs one that can (gpu-bridge)`);
  const started = Date.now();
  const events: NewEvent[] = [];
  let version = effect.version;
  let step = effect.step;
  while (step < steps) {
    step++;
    const batch = sftBatch(rows, seed, sft.batchSize, step);
    const samples: TrainSample[] = batch.map((r) => ({ prompt: r.prompt, response: r.completion, advantage: 0, contextKey: r.problemId, choiceKey: null }));
    const batchId = `${env.runId}/sft/${step}/${role}`;
    const batchHash = await env.blobs.put(samples.map((s) => canonicalJson(s)).join('\n'));
    events.push(
      env.event('TrainingBatchFormed', {
        round: 0,
        batchId,
        role,
        policy: { role, name: trainer.name, version },
        batchHash,
        size: samples.length,
        sampleIds: batch.map((r) => r.id),
        control: 'none',
        advantageFrom: null,
        staleness: { maxStaleness: null, dropped: [] },
      }),
    );
    const result = await trainer.trainStep({ batchId, role, expectedVersion: version, algorithm: 'sft', samples, hyper: { lr: sft.lr } });
    for (const f of result.failures ?? []) events.push(env.event('TrainingStepFailed', { batchId, role, error: f.error, retryable: f.retryable }));
    events.push(env.event('TrainingStepCompleted', { round: 0, batchId, role, fromVersion: version, toVersion: result.version, metrics: result.metrics }));
    version = result.version;
    if (step - effect.step >= sft.record.steps) break;
    if (sft.record.seconds !== undefined && Date.now() - started >= sft.record.seconds * 1000) break;
  }
  const cp = await trainer.checkpoint();
  if (step === steps && cache) await cache.put(key, role, cp.params, { ...parts, computedBy: env.runId });
  return [...events, await checkpointed(step, trainer.name, cp, false)];
}

/** Where the warm start stands, for the progress line: the role under way, its last recorded
 * step and that step's loss (null when the checkpoint came from the cache). */
export interface WarmStartProgress {
  role: Role;
  step: number;
  steps: number;
  loss: number | null;
}

/** A runtime view of the warm start's progress: `current` is its last recorded chunk until
 * round 1 starts, then null (null throughout without a warm start). */
export class WarmStartWatch implements RuntimeView {
  readonly types = ['RunStarted', 'TrainingStepCompleted', 'WarmStartCheckpointed', 'RoundStarted'];
  current: WarmStartProgress | null = null;
  #started = false;
  #loss: number | null = null;

  observe(envelope: EventEnvelope): void {
    switch (envelope.type) {
      case 'RunStarted': {
        const first = warmStartPlan(configOf(envelope)).plan[0];
        if (first && !this.#started) this.current = { role: first.role, step: 0, steps: first.steps, loss: null };
        return;
      }
      case 'TrainingStepCompleted': {
        const d = envelope.data as EventData<'TrainingStepCompleted'>;
        if (d.round === 0) this.#loss = d.metrics.loss ?? null;
        return;
      }
      case 'WarmStartCheckpointed': {
        if (this.#started) return;
        const d = envelope.data as EventData<'WarmStartCheckpointed'>;
        this.current = { role: d.role, step: d.step, steps: d.steps, loss: d.cached ? null : this.#loss };
        return;
      }
      case 'RoundStarted':
        this.#started = true;
        this.current = null;
    }
  }
}
