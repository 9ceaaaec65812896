/** The eight verdicts of one (program, test) execution: shared by the sandbox that produces
 * them, the events that record them and the rewards that read them. */
export const VERDICTS = [
  'accepted',
  'wrong_answer',
  'runtime_error',
  'time_limit',
  'memory_limit',
  'output_limit',
  'compile_error',
  'sandbox_error',
] as const;
export type Verdict = (typeof VERDICTS)[number];
