/**
 * The Solver samples G candidate programs per scheduled problem from the code policy, at the
 * policy version the Conductor named, with a seed derived from the run seed and the problem
 * (and, when sampling.heldOutSamples is set, that many more for the held-out evaluation only).
 */
import { assign, setup } from 'xstate';
import { z } from 'zod';
import type { SnapshotFrom } from 'xstate';
import { withoutKey, type ActorDefinition, type LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { dataOf } from './events.js';
import { modelSampleEvents } from './model-samples.js';

const Job = z.strictObject({
  key: z.string(),
  round: z.int().nonnegative(),
  problemId: z.string(),
  groupSize: z.int().nonnegative(),
  version: z.int(),
});
type Job = z.infer<typeof Job>;

/** Its machine context, which a snapshot stores (see snapshot-schema.ts). */
export const SolverContext = z.strictObject({ jobs: z.array(Job) });
export type SolverContext = z.infer<typeof SolverContext>;

const jobKey = (round: number, problemId: string) => `${round}/${problemId}`;

export const solverMachine = setup({
  types: { context: {} as SolverContext, events: {} as LogEvent },
}).createMachine({
  id: 'solver',
  context: { jobs: [] },
  on: {
    ProblemScheduled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ProblemScheduled');
        const job = { key: jobKey(d.round, d.problemId), round: d.round, problemId: d.problemId, groupSize: d.groupSize, version: d.codeVersion };
        return { jobs: [...context.jobs, job] };
      }),
    },
    // All G samples of a job are one commit: seeing one means the job is done.
    SolutionSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'SolutionSampled');
        const key = jobKey(d.round, d.problemId);
        return { jobs: withoutKey(context.jobs, key) };
      }),
    },
  },
});

export type SolverEffect = Job;

export const solver: ActorDefinition<typeof solverMachine, SolverEffect, RunEnv> = {
  name: 'solver',
  machine: solverMachine,
  context: SolverContext,
  pending: (snapshot: SnapshotFrom<typeof solverMachine>) => snapshot.context.jobs,
  async run(job, env) {
    const problem = await env.problem(job.problemId);
    const seed = env.seed('solver', job.round, job.problemId);
    const policy = await env.policy('code', job.version);
    const generations = await policy.generate({
      role: 'code',
      version: job.version,
      seed,
      n: job.groupSize,
      prompts: [{ key: job.problemId, prompt: problem.statement, context: { problemId: job.problemId } }],
    });
    const events = [];
    for (const g of generations) {
      const programHash = await env.blobs.put(g.text);
      const solutionId = `${job.round}/${job.problemId}/s${g.index}`;
      const policyRef = { role: 'code' as const, name: policy.name, version: job.version };
      events.push(
        env.event('SolutionSampled', {
          round: job.round,
          problemId: job.problemId,
          solutionId,
          programHash,
          policy: policyRef,
          sampling: { seed, index: g.index, temperature: policy.temperature, candidateId: g.choiceKey, contextKey: g.contextKey },
          // A model's raw answer, when the program was read out of one.
          responseHash: g.record ? await env.blobs.put(g.record.response) : null,
        }),
        ...(await modelSampleEvents(env, g, solutionId, policyRef)),
      );
    }
    // Programs for the held-out evaluation only, in the same commit: the Judge's round is
    // sampled once both are in. A seed of their own, so the G training samples are the same
    // with or without them.
    const extra = env.config.sampling.heldOutSamples;
    if (extra !== undefined) {
      const heldOutSeed = env.seed('solver-heldout', job.round, job.problemId);
      const drawn = await policy.generate({
        role: 'code',
        version: job.version,
        seed: heldOutSeed,
        n: extra,
        prompts: [{ key: job.problemId, prompt: problem.statement, context: { problemId: job.problemId } }],
      });
      const programs = [];
      for (const g of drawn) {
        programs.push({
          programId: `${job.round}/${job.problemId}/h${g.index}`,
          programHash: await env.blobs.put(g.text),
          responseHash: g.record ? await env.blobs.put(g.record.response) : null,
        });
      }
      events.push(
        env.event('HeldOutSampled', {
          round: job.round,
          problemId: job.problemId,
          policy: { role: 'code', name: policy.name, version: job.version },
          seed: heldOutSeed,
          temperature: policy.temperature,
          programs,
        }),
      );
    }
    return events;
  },
};
