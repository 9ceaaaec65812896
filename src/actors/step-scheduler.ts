/**
 * Which pending effects a dispatch step runs, and in which order their outputs are appended.
 * The runtime's default runs every pending effect and appends in the order the work was listed;
 * a run of many processes gets other orders from the network, so no decision may depend on
 * this one. Tests inject a scheduler that perturbs it (`test/support/shuffled-scheduler.ts`) to
 * check exactly that.
 */
export interface StepScheduler {
  /** The work this step runs; never empty when `work` is not (the run must move on). */
  pick<T>(work: readonly T[]): readonly T[];
  /** The order in which this step's outputs are appended. */
  order<T>(outputs: readonly T[]): readonly T[];
}

/** Everything pending, appended in the order listed. */
export const IN_ORDER: StepScheduler = {
  pick: (work) => work,
  order: (outputs) => outputs,
};
