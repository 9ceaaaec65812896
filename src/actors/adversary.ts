/**
 * The Adversary samples test suites from the test policy for every sampled program: white-box
 * (the policy sees the program it attacks) or black-box (only the problem). Each generated line
 * is parsed into a test here, at the boundary; a line that is not a test is kept as a
 * malformed test so that the reward can count it.
 */
import { assign, setup } from 'xstate';
import { z } from 'zod';
import type { SnapshotFrom } from 'xstate';
import { withoutKey, type ActorDefinition, type LogEvent } from './runtime.js';
import type { RunEnv } from './env.js';
import { dataOf } from './events.js';
import { modelSampleEvents } from './model-samples.js';
import { parseTestLines } from './test-text.js';
import { nonprintableRatio } from '../rewards/code-a1.js';

const Job = z.strictObject({
  key: z.string(),
  round: z.int().nonnegative(),
  problemId: z.string(),
  solutionId: z.string(),
  programHash: z.string(),
  candidateId: z.string().nullable(),
  whiteBox: z.boolean(),
  version: z.int(),
});
type Job = z.infer<typeof Job>;

/** Its machine context, which a snapshot stores (see snapshot-schema.ts). */
export const AdversaryContext = z.strictObject({
  /** problem-round -> what the Conductor asked for. */
  scheduled: z.record(z.string(), z.strictObject({ whiteBox: z.boolean(), version: z.int() })),
  jobs: z.array(Job),
});
export type AdversaryContext = z.infer<typeof AdversaryContext>;

export const adversaryMachine = setup({
  types: { context: {} as AdversaryContext, events: {} as LogEvent },
}).createMachine({
  id: 'adversary',
  context: { scheduled: {}, jobs: [] },
  on: {
    ProblemScheduled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'ProblemScheduled');
        return { scheduled: { ...context.scheduled, [`${d.round}/${d.problemId}`]: { whiteBox: d.whiteBox, version: d.testVersion } } };
      }),
    },
    SolutionSampled: {
      actions: assign(({ context, event }) => {
        const d = dataOf(event.envelope, 'SolutionSampled');
        const s = context.scheduled[`${d.round}/${d.problemId}`];
        if (!s) return {};
        const job: Job = {
          key: d.solutionId,
          round: d.round,
          problemId: d.problemId,
          solutionId: d.solutionId,
          programHash: d.programHash,
          candidateId: d.sampling.candidateId,
          whiteBox: s.whiteBox,
          version: s.version,
        };
        return { jobs: [...context.jobs, job] };
      }),
    },
    TestsSampled: {
      actions: assign(({ context, event }) => {
        const target = dataOf(event.envelope, 'TestsSampled').targetSolutionId;
        return target === null ? {} : { jobs: withoutKey(context.jobs, target) };
      }),
    },
  },
});

export type AdversaryEffect = Job;

export const adversary: ActorDefinition<typeof adversaryMachine, AdversaryEffect, RunEnv> = {
  name: 'adversary',
  machine: adversaryMachine,
  context: AdversaryContext,
  pending: (snapshot: SnapshotFrom<typeof adversaryMachine>) => snapshot.context.jobs,
  async run(job, env) {
    const problem = await env.problem(job.problemId);
    const suites = env.config.sampling.suitesPerProgram;
    const seed = env.seed('adversary', job.round, job.solutionId);
    const policy = await env.policy('test', job.version);
    const context: Record<string, string> = { problemId: job.problemId, suiteSize: String(env.config.sampling.suiteSize) };
    let prompt = problem.statement;
    if (job.whiteBox) {
      if (job.candidateId !== null) context.target = job.candidateId;
      const program = await env.blobs.getText(job.programHash);
      // Model backends render their own white-box prompt around the program.
      context.program = program;
      prompt += `\n\n# Program under test\n${program}`;
    }
    const generations = await policy.generate({
      role: 'test',
      version: job.version,
      seed,
      n: suites,
      prompts: [{ key: job.solutionId, prompt, context }],
    });
    const events = [];
    for (const g of generations) {
      const suiteId = `${job.solutionId}/t${g.index}`;
      const responseHash = await env.blobs.put(g.text);
      const policyRef = { role: 'test' as const, name: policy.name, version: job.version };
      const tests = [];
      for (const [i, parsed] of parseTestLines(g.text, problem.style).entries()) {
        const testHash = await env.blobs.put(parsed.canonical);
        if (parsed.ok) env.rememberCheckedTest(testHash, parsed.canonical);
        tests.push({ testId: `${suiteId}/${i}`, testHash, wellFormed: parsed.ok, reason: parsed.ok ? null : parsed.reason });
      }
      events.push(
        env.event('TestsSampled', {
          round: job.round,
          problemId: job.problemId,
          suiteId,
          targetSolutionId: job.solutionId,
          policy: policyRef,
          sampling: { seed, index: g.index, temperature: policy.temperature, candidateId: g.choiceKey, contextKey: g.contextKey },
          responseHash,
          // Code-A1's penalty looks at what the model wrote, not at the tests read from it.
          nonprintableRatio: nonprintableRatio(g.record?.response ?? g.text),
          tests,
        }),
        ...(await modelSampleEvents(env, g, suiteId, policyRef)),
      );
    }
    return events;
  },
};
