/** Names on the worker board and task queues, shared by workers and `status`. */
export const leaseNameOf = (role: string): string => `role-${role}`;
/** The task queue of the programs of execution requests. */
export const PROGRAM_QUEUE = 'programs';

/** The roles that sample from a policy; their processes split the sampling through a task queue. */
export type SamplerRole = 'solver' | 'adversary';
/** The task queue of each sampler role: one task per effect (a problem's solutions for the
 * Solver, a solution's test suites for the Adversary). nats-auth.ts opens each to its role only. */
export const SAMPLE_QUEUES: Readonly<Record<SamplerRole, string>> = { solver: 'solutions', adversary: 'suites' };
export const sampleQueueOf = (role: SamplerRole): string => SAMPLE_QUEUES[role];

/** Every task queue of a run, in the order `status` shows them. */
export const TASK_QUEUES: readonly string[] = [PROGRAM_QUEUE, SAMPLE_QUEUES.solver, SAMPLE_QUEUES.adversary];
