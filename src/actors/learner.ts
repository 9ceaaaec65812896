/**
 * The Learner warms the policies up when asked (learner.sft: warm-start.ts) and publishes the
 * initial policies, then after each round forms one training batch
 * per role from the Judge's advantages, drives one training step through the trainer port, and
 * publishes the new version. Rewards, advantages and selection are computed upstream (in the
 * log); the trainer only applies them.
 *
 * Its states: `waiting` for the run to start; `initializing` until both roles' first versions
 * are published (the init effect); `collecting` the rounds' rewards; `training` while a round
 * has all its rewards (the train effect, oldest such round first). Publishing the trained
 * version is not a state of its own: the step's commit publishes it, so no log holds a trained
 * step whose version is unpublished.
 */
import { assign, setup } from 'xstate';
import { z } from 'zod';
import type { SnapshotFrom } from 'xstate';
import type { ActorDefinition, LogEvent } from './runtime.js';
import type { LearnerTrainer, RunEnv } from './env.js';
import { configOf, dataOf } from './events.js';
import { catalog } from '../events/catalog.js';
import type { TrainSample } from '../policies/port.js';
import { canonicalJson } from '../core/canonical-json.js';
import { algorithmOf } from './methods/index.js';
import { Rng } from '../core/rng.js';
import {
  NO_WARM_START,
  WarmStartState,
  foldWarmStartCheckpoint,
  runWarmStartChunk,
  warmStartPending,
  warmStartPlan,
  warmVersions,
  type WarmStartEffect,
} from './warm-start.js';

import { Role } from '../core/roles.js';

const SampleRef = z.strictObject({
  sampleId: z.string(),
  problemId: z.string(),
  /** Program or suite blob; the response text trained on. */
  responseHash: z.string(),
  /** Model samples: the exact prompt sent (else the problem statement is the prompt). */
  promptHash: z.string().optional(),
  contextKey: z.string(),
  choiceKey: z.string().nullable(),
  /** The round that drew it and the policy version it was drawn from (the off-policy bound). */
  round: z.int().nonnegative(),
  version: z.int(),
  /** Model samples: the blob of the sampled token ids and their log-probs, when recorded. */
  tokensHash: z.string().nullable().optional(),
});
type SampleRef = z.infer<typeof SampleRef>;

/** A ModelSampled tokens blob, as written from the server's answer. */
const SampledTokens = z.object({ tokenIds: z.array(z.int().nonnegative()).nullable(), tokenLogprobs: z.array(z.number()).nullable() });

/** The sampled completion's tokens with their sampling log-probs, when the server returned
 * both, one log-prob per token, each a finite log-probability; else undefined (trained as text). */
export function sampledTokens(blob: string): TrainSample['sampled'] {
  const parsed = SampledTokens.safeParse(JSON.parse(blob));
  if (!parsed.success) return undefined;
  const { tokenIds, tokenLogprobs } = parsed.data;
  if (!tokenIds || !tokenLogprobs || tokenIds.length === 0 || tokenIds.length !== tokenLogprobs.length) return undefined;
  if (!tokenLogprobs.every((x) => Number.isFinite(x) && x <= 0)) return undefined;
  return { tokenIds, logprobs: tokenLogprobs };
}

const RoundWork = z.strictObject({
  round: z.int().nonnegative(),
  problemIds: z.array(z.string()),
  /** The round's RewardsAssigned per role, as their events hold them. */
  rewards: z.record(Role, z.array(catalog.specs.RewardsAssigned.schema)),
});

/** Its machine context, which a snapshot stores (see snapshot-schema.ts). */
export const LearnerContext = z.strictObject({
  whiteBox: z.boolean(),
  /** TCS trains test-policy samples of earlier rounds again (its rolling buffer): their
   * references are kept after their round is trained. */
  keepTestSamples: z.boolean(),
  /** One policy for both roles (config policies.shared): one trainer, one version stream. */
  shared: z.boolean(),
  /** Latest published version per role (-1: none yet). */
  versions: z.record(Role, z.int()),
  trainedRounds: z.array(z.int().nonnegative()),
  /** Samples by problem, then by sample id: an event copies one problem's few samples, not
   * every sample of the round. */
  samples: z.record(z.string(), z.record(z.string(), SampleRef)),
  rounds: z.record(z.string(), RoundWork),
  /** learner.sft: the warm start's plan and its last recorded checkpoint per role (warm-start.ts). */
  warmStart: WarmStartState,
});
export type LearnerContext = z.infer<typeof LearnerContext>;

/** The rounds whose rewards are all in, for both roles: each is a training step to take. */
function trainableRounds(c: LearnerContext): number[] {
  const done = (work: z.infer<typeof RoundWork>, role: Role) => new Set(work.rewards[role].map((r) => r.problemId)).size === work.problemIds.length;
  return Object.values(c.rounds)
    .filter((work) => done(work, 'code') && done(work, 'test'))
    .map((work) => work.round)
    .sort((a, b) => a - b);
}

const withSample = (samples: LearnerContext['samples'], ref: SampleRef): LearnerContext['samples'] => ({
  ...samples,
  [ref.problemId]: { ...samples[ref.problemId], [ref.sampleId]: ref },
});

export const learnerMachine = setup({
  types: { context: {} as LearnerContext, events: {} as LogEvent },
  actions: {
    addRewards: assign(({ context, event }) => {
      const d = dataOf(event.envelope, 'RewardsAssigned');
      const work = context.rounds[d.round];
      if (!work) return {};
      const rewards = { ...work.rewards, [d.role]: [...work.rewards[d.role], d] };
      return { rounds: { ...context.rounds, [d.round]: { ...work, rewards } } };
    }),
    published: assign(({ context, event }) => {
      const d = dataOf(event.envelope, 'PolicyVersionPublished');
      const versions = { ...context.versions, [d.policy.role]: d.policy.version };
      if (d.round === 0 || d.policy.role !== 'test') return { versions };
      // Both roles of a round are published in one commit, test last: the round is trained.
      const { [d.round]: done, ...rounds } = context.rounds;
      const samples = { ...context.samples };
      for (const role of ['code', 'test'] as const) {
        if (role === 'test' && context.keepTestSamples) continue;
        for (const r of done?.rewards[role] ?? []) {
          const kept = { ...samples[r.problemId] };
          for (const i of r.items) delete kept[i.sampleId];
          if (Object.keys(kept).length > 0) samples[r.problemId] = kept;
          else delete samples[r.problemId];
        }
      }
      return { versions, rounds, samples, trainedRounds: [...context.trainedRounds, d.round] };
    }),
    configure: assign(({ event }) => {
      const config = configOf(event.envelope);
      return { whiteBox: config.sampling.whiteBox, keepTestSamples: config.method === 'tcs', shared: config.policies.shared, warmStart: warmStartPlan(config) };
    }),
  },
  guards: {
    published: ({ context }) => context.versions.code >= 0 && context.versions.test >= 0,
    roundComplete: ({ context }) => trainableRounds(context).length > 0,
  },
}).createMachine({
  id: 'learner',
  initial: 'waiting',
  states: {
    waiting: { on: { RunStarted: { target: 'initializing', actions: 'configure' } } },
    initializing: { always: { guard: 'published', target: 'collecting' } },
    // Only rewards complete a round and only a published version ends one: the choice is made
    // after those events, not after every event (a guard over every open round's rewards).
    collecting: { on: { RewardsAssigned: { actions: 'addRewards', target: 'deciding' } } },
    training: { on: { PolicyVersionPublished: { actions: 'published', target: 'deciding' } } },
    deciding: { always: [{ guard: 'roundComplete', target: 'training' }, { target: 'collecting' }] },
  },
  context: {
    whiteBox: true,
    keepTestSamples: false,
    shared: false,
    versions: { code: -1, test: -1 },
    trainedRounds: [],
    samples: {},
    rounds: {},
    warmStart: NO_WARM_START,
  },
  on: {
    WarmStartCheckpointed: {
      actions: assign(({ context, event }) => ({ warmStart: foldWarmStartCheckpoint(context.warmStart, dataOf(event.envelope, 'WarmStartCheckpointed')) })),
    },
    RoundStarted: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'RoundStarted');
        return { rounds: { ...context.rounds, [d.round]: { round: d.round, problemIds: d.problemIds, rewards: { code: [], test: [] } } } };
      }),
    },
    SolutionSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'SolutionSampled');
        const ref: SampleRef = {
          sampleId: d.solutionId,
          problemId: d.problemId,
          responseHash: d.programHash,
          contextKey: d.sampling.contextKey ?? d.problemId,
          choiceKey: d.sampling.candidateId,
          round: d.round,
          version: d.policy.version,
        };
        return { samples: withSample(context.samples, ref) };
      }),
    },
    TestsSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'TestsSampled');
        const contextKey = d.sampling.contextKey ?? d.problemId;
        const ref: SampleRef = {
          sampleId: d.suiteId,
          problemId: d.problemId,
          responseHash: d.responseHash ?? '',
          contextKey,
          choiceKey: d.sampling.candidateId,
          round: d.round,
          version: d.policy.version,
        };
        return { samples: withSample(context.samples, ref) };
      }),
    },
    // A model sample trains on what the model saw and wrote: the rendered prompt (with the
    // program, white-box) and the raw answer, not the program or tests read from it.
    ModelSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ModelSampled');
        // The event names the sample, not its problem: find the problem that holds it.
        const ref = Object.values(context.samples).find((bySample) => d.sampleId in bySample)?.[d.sampleId];
        if (!ref) return {};
        return { samples: withSample(context.samples, { ...ref, promptHash: d.promptHash, responseHash: d.responseHash, tokensHash: d.tokensHash }) };
      }),
    },
    RewardsAssigned: { actions: 'addRewards' },
    PolicyVersionPublished: { actions: 'published' },
  },
});

type Snapshot = SnapshotFrom<typeof learnerMachine>;

export type LearnerEffect = { key: string; kind: 'init' } | WarmStartEffect | { key: string; kind: 'train'; round: number };

export function learnerPending(snapshot: Snapshot): LearnerEffect[] {
  if (snapshot.matches('initializing')) {
    // The warm start's chunks first, then the initial versions (the warm ones) are published.
    return [warmStartPending(snapshot.context.warmStart) ?? { key: 'init', kind: 'init' }];
  }
  if (!snapshot.matches('training')) return [];
  // One step at a time, oldest round first: a step needs the version the previous one made.
  const round = trainableRounds(snapshot.context)[0]!;
  return [{ key: `train/${round}`, kind: 'train', round }];
}

async function publish(env: RunEnv, role: Role, round: number, from?: LearnerTrainer) {
  const trainer = from ?? (await env.trainer(role));
  const snap = await trainer.snapshot();
  const paramsHash = await env.blobs.put(snap.params);
  const policy = { role, name: trainer.name, version: snap.version };
  const published = env.event('PolicyVersionPublished', { round, policy, checkpoint: paramsHash, paramsHash });
  if (!snap.synced) return [published];
  const { kind, url, request, status, servedModel } = snap.synced;
  return [published, env.event('WeightsSynced', { round, policy, kind, url, request, status, servedModel })];
}

/** The off-policy bound (learner.maxStaleness): a sample drawn at `sampleVersion` is too old
 * for a step that trains `trainedVersion` when more than `maxStaleness` versions lie between. */
export function tooStale(sampleVersion: number, trainedVersion: number, maxStaleness: number): boolean {
  return trainedVersion - sampleVersion > maxStaleness;
}

/** Shuffled control: for each group (one problem's rewarded samples of one role), a seeded
 * permutation of the group's own positions; returns, per batch position, the position whose
 * advantage it trains with. */
export function shuffledAdvantageSources(groups: readonly number[], seedOf: (group: number) => number): number[] {
  const from: number[] = [];
  let at = 0;
  groups.forEach((size, g) => {
    const positions = Array.from({ length: size }, (_, i) => at + i);
    from.push(...Rng.derive(seedOf(g), 'advantages').shuffle(positions));
    at += size;
  });
  return from;
}

/** A training step that threw: the runtime records it as TrainingStepFailed and tries the
 * round's effect again (a trainer restored from the last published checkpoint, the same batch id). */
export class TrainingStepError extends Error {
  constructor(
    readonly batchId: string,
    readonly role: Role,
    cause: unknown,
  ) {
    super(`the ${role} training step of ${batchId} failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'TrainingStepError';
  }
}

export const learner: ActorDefinition<typeof learnerMachine, LearnerEffect, RunEnv> = {
  name: 'learner',
  failureEvent(_effect, failure, env) {
    const e = failure.error;
    if (!(e instanceof TrainingStepError)) return null;
    const cause = e.cause instanceof Error ? e.cause.message : String(e.cause);
    return env.event('TrainingStepFailed', { batchId: e.batchId, role: e.role, error: cause.trim() === '' ? e.message : cause, retryable: failure.willRetry });
  },
  machine: learnerMachine,
  context: LearnerContext,
  pending: learnerPending,
  async run(effect, env, snapshot) {
    if (effect.kind === 'sft') return runWarmStartChunk(env, effect);
    if (effect.kind === 'init') {
      // A warmed role publishes its warm version (its trainer restored from the last recorded
      // checkpoint when not in memory), the others their fresh version 0.
      const warm = warmVersions(snapshot.context.warmStart);
      const events = [];
      for (const role of ['code', 'test'] as const) {
        const at = warm[role];
        events.push(...(await publish(env, role, 0, at === undefined ? undefined : await env.trainer(role, at))));
      }
      return events;
    }
    const c = snapshot.context;
    const work = c.rounds[effect.round]!;
    const control = env.config.learner.control;
    const maxStaleness = env.config.learner.maxStaleness;
    const events = [];
    const published = [];
    const paramsBefore = {} as Record<Role, string>;
    const paramsAfter = {} as Record<Role, string>;
    const versionsAfter = { ...c.versions };
    // Shared: both roles are at one version; the code step makes the next, the test step the one
    // after, on one trainer (kept in the code role's slot), and both roles publish its result.
    let sharedAt = c.versions.code;
    let sharedTrainer: LearnerTrainer | null = null;
    for (const role of ['code', 'test'] as const) {
      const trainer = c.shared ? await env.trainer('code', sharedAt) : await env.trainer(role, c.versions[role]);
      // Shared: the test step starts after the code step, but the round was drawn from sharedAt.
      paramsBefore[role] = c.shared && role === 'test' ? paramsBefore.code : (await trainer.snapshot()).params;
      const samples: TrainSample[] = [];
      const sampleIds: string[] = [];
      const groups: number[] = [];
      const groupProblems: string[] = [];
      const dropped: { sampleId: string; version: number }[] = [];
      // Staleness is measured from the version the round's batches are formed from: a shared
      // policy's two steps of one round count as one update of the policy that sampled it.
      const trainedVersion = c.versions[role];
      // Problems in round order, items in their recorded order: one batch for one log.
      const byProblem = new Map(work.rewards[role].map((r) => [r.problemId, r]));
      for (const problemId of work.problemIds) {
        let size = 0;
        for (const item of byProblem.get(problemId)?.items ?? []) {
          if (item.components.selected === 0) continue;
          const ref = c.samples[problemId]?.[item.sampleId];
          if (!ref) throw new Error(`reward for unknown sample ${item.sampleId}`);
          // Samples of earlier rounds that the method keeps in its buffer (TCS) are bounded by
          // the method's own staleness option (tcs.maxStaleness), not by this one.
          const buffered = role === 'test' && c.keepTestSamples && ref.round < effect.round;
          if (!buffered && tooStale(ref.version, trainedVersion, maxStaleness)) {
            dropped.push({ sampleId: item.sampleId, version: ref.version });
            continue;
          }
          const sampled = ref.tokensHash ? sampledTokens(await env.blobs.getText(ref.tokensHash)) : undefined;
          samples.push({
            prompt: ref.promptHash ? await env.blobs.getText(ref.promptHash) : (await env.problem(problemId)).statement,
            response: ref.responseHash ? await env.blobs.getText(ref.responseHash) : '',
            advantage: item.advantage,
            contextKey: ref.contextKey,
            choiceKey: ref.choiceKey,
            ...(sampled ? { sampled } : {}),
          });
          sampleIds.push(item.sampleId);
          size++;
        }
        groups.push(size);
        groupProblems.push(problemId);
      }
      let advantageFrom: number[] | null = null;
      if (control === 'shuffled') {
        advantageFrom = shuffledAdvantageSources(groups, (g) => env.seed('shuffle', effect.round, role, groupProblems[g]!));
        const own = samples.map((s) => s.advantage);
        samples.forEach((s, i) => {
          s.advantage = own[advantageFrom![i]!]!;
        });
      }
      const batchId = `${env.runId}/round/${effect.round}/${role}`;
      const batchHash = await env.blobs.put(samples.map((s) => canonicalJson(s)).join('\n'));
      const fromVersion = c.shared ? sharedAt : c.versions[role];
      events.push(
        env.event('TrainingBatchFormed', {
          round: effect.round,
          batchId,
          role,
          policy: { role, name: trainer.name, version: fromVersion },
          batchHash,
          size: samples.length,
          sampleIds,
          control,
          advantageFrom,
          staleness: { maxStaleness, dropped },
        }),
      );
      // Frozen: the same step through the same port, at learning rate 0 (no update).
      const hyper = { lr: control === 'frozen' ? 0 : env.config.policies[role].lr };
      let result;
      try {
        result = await trainer.trainStep({ batchId, role, expectedVersion: fromVersion, algorithm: algorithmOf(env.config.method, role), samples, hyper });
      } catch (err) {
        throw new TrainingStepError(batchId, role, err);
      }
      for (const f of result.failures ?? []) events.push(env.event('TrainingStepFailed', { batchId, role, error: f.error, retryable: f.retryable }));
      events.push(env.event('TrainingStepCompleted', { round: effect.round, batchId, role, fromVersion, toVersion: result.version, metrics: result.metrics }));
      paramsAfter[role] = (await trainer.snapshot()).params;
      versionsAfter[role] = result.version;
      if (c.shared) {
        sharedAt = result.version;
        sharedTrainer = trainer;
      } else published.push(...(await publish(env, role, effect.round)));
    }
    if (sharedTrainer) {
      const params = (await sharedTrainer.snapshot()).params;
      for (const role of ['code', 'test'] as const) {
        paramsAfter[role] = params;
        versionsAfter[role] = sharedAt;
        published.push(...(await publish(env, role, effect.round, sharedTrainer)));
      }
    }
    const evaluated = [];
    if (env.backend.exactBasis) {
      const figures = (params: Record<Role, string>, versions: Record<Role, number>) => {
        const problems = env.backend.evaluate(params, work.problemIds, c.whiteBox);
        const mean = (f: (p: (typeof problems)[number]) => number) => (problems.length ? problems.reduce((s, p) => s + f(p), 0) / problems.length : 0);
        return { codeVersion: versions.code, testVersion: versions.test, correct: mean((p) => p.correct), validTest: mean((p) => p.validTest), problems };
      };
      evaluated.push(
        env.event('PolicyEvaluated', {
          round: effect.round,
          basis: env.backend.exactBasis,
          sampled: figures(paramsBefore, c.versions),
          trained: figures(paramsAfter, versionsAfter),
        }),
      );
    }
    return [...events, ...published, ...evaluated];
  },
};
