/** The eight verdicts of one (program, test) execution: shared by the sandbox that produces
 * them, the events that record them and the rewards that read them. */
export const VERDICTS = ['accepted', 'wrong_answer', 'runtime_error', 'time_limit', 'memory_limit', 'output_limit', 'compile_error', 'sandbox_error'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** One letter per verdict, for compact records of many results (ProgramExecuted). */
export const VERDICT_CODES: Readonly<Record<Verdict, string>> = {
  accepted: 'A',
  wrong_answer: 'W',
  runtime_error: 'R',
  time_limit: 'T',
  memory_limit: 'M',
  output_limit: 'O',
  compile_error: 'C',
  sandbox_error: 'S',
};
const BY_CODE = new Map(Object.entries(VERDICT_CODES).map(([v, c]) => [c, v as Verdict]));
/** A string of verdict letters. */
export const VERDICT_CODE_RUN = /^[AWRTMOCS]*$/;

/** The verdict of a letter of VERDICT_CODES (throws on any other letter). */
export function verdictOfCode(code: string): Verdict {
  const v = BY_CODE.get(code);
  if (v === undefined) throw new Error(`"${code}" is not a verdict letter (AWRTMOCS)`);
  return v;
}
