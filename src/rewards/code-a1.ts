/**
 * Code-A1 rewards, as read from the released code (ZJU-REAL/Code-A1, code/rl/reward.py and
 * trainer_a1.py) and METHODS.md:
 *
 *   valid_ratio = clip(min(|valid_t| / 8, 1 - invalid_t / 8), 0, 1)
 *   gen_pass    = passed_t / |valid_t|                 (0 if no valid test)
 *   gen_fail    = failing among the first 8 valid tests / 8
 *   hist_pass   = passed hist / |hist|;  hist_fail = 1 - hist_pass
 *   hist & gen: pass = (hist_pass + gen_pass) / 2;  attack = (gen_fail - hist_fail + 1) / 2
 *   hist only:  pass = hist_pass;  attack = 0
 *   gen only:   pass = gen_pass;   attack = gen_fail
 *   neither:    pass = 0;          attack = 0
 *   R_code(c)   = mean over c's suites of pass
 *   R_test(c,t) = -nonprintable_ratio + [c valid] * (alpha * valid_ratio + (1 - alpha) * attack)
 *
 * Sandbox errors (crucible's addition; the released code turned them into timeouts): a cell
 * whose verdict is sandbox_error or missing is treated as not run. It is left out of
 * passed_t/|observed| and of hist, and the gen_fail window is the first `suiteCap` tests that
 * have a verdict (denominator still `suiteCap`). |valid_t| and invalid_t in valid_ratio are
 * properties of the suite against GT and do not depend on c's cells. A generated test whose
 * GT run hit a sandbox error has status `unknown`: it is neither valid nor invalid.
 */
import { z } from 'zod';
import {
  type ExecutionMatrix,
  type Outcome,
  type TestStatus,
  RewardInputError,
  candidateIndices,
  countOutcomes,
  meanInOrder,
  parseWith,
  passVector,
  isUsable,
  sumInOrder,
} from './matrix.js';
import { correctedStatement, parseAssertCall } from './test-key.js';
import { readResponseTests } from '../core/response-tests.js';
import type { TestCase } from '../core/problem.js';
import type { Verdict } from '../core/verdicts.js';
import type { ModuleLoad } from '../core/module-load.js';
import { groupAdvantages, type AdvantageOptionsInput } from './grpo.js';

export const CODE_A1_ID = 'code-a1/v1';

export const CodeA1Options = z
  .object({
    /** Weight of valid_ratio against attack in R_test. */
    alpha: z.number().min(0).max(1).default(0.5),
    /** The 8 of valid_ratio and gen_fail: tests a suite is meant to hold. */
    suiteCap: z.number().int().positive().default(8),
    /** Mistake Book tests replayed per problem (hist). */
    histCap: z.number().int().positive().default(8),
    /** Suite id of the Mistake Book replay tests in the matrix. */
    histSuite: z.string().min(1).default('mistake-book'),
  })
  .strict();
export type CodeA1Options = z.output<typeof CodeA1Options>;
export type CodeA1OptionsInput = z.input<typeof CodeA1Options>;

// ---------------------------------------------------------------------------------------------
// Printable characters

/** Python's string.printable: digits, ASCII letters, punctuation, and ' \t\n\r\x0b\x0c'. */
function isPythonPrintable(cp: number): boolean {
  if (cp >= 0x20 && cp <= 0x7e) return true;
  return cp === 0x09 || cp === 0x0a || cp === 0x0d || cp === 0x0b || cp === 0x0c;
}

/**
 * Share of characters (Unicode code points, as Python's len counts them) of a test-policy
 * response that are not in Python's string.printable. 0 for an empty response (the released
 * code would divide by zero).
 */
export function nonprintableRatio(text: string): number {
  let total = 0;
  let bad = 0;
  for (const ch of text) {
    total++;
    if (!isPythonPrintable(ch.codePointAt(0) as number)) bad++;
  }
  return total === 0 ? 0 : bad / total;
}

// ---------------------------------------------------------------------------------------------
// Test validation against the GT program

/** What running the call of a generated test on the GT program gave. `repr` is Python's repr
 * of the return value; `matchesStated` is Python's `(result) == (stated expected)`, evaluated
 * in the sandbox (only Python can compare Python values faithfully). */
export const GtOutcome = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('returned'),
    repr: z.string(),
    matchesStated: z.boolean(),
    /** Python's ast.unparse of the call (the release's statement text), when known: duplicates
     * are found on `assert <call> == <repr>` with it. */
    call: z.string().optional(),
  }),
  z.object({ kind: z.literal('raised'), exceptionType: z.string().optional() }),
  z.object({ kind: z.literal('sandbox_error') }),
]);
export type GtOutcome = z.infer<typeof GtOutcome>;

export const GeneratedAssert = z.object({
  id: z.string().min(1),
  text: z.string(),
  /** Absent when the test was not run on GT (it is malformed, so it never is). */
  gt: GtOutcome.optional(),
});
export type GeneratedAssert = z.infer<typeof GeneratedAssert>;

export type ValidationReason = 'ok' | 'corrected' | 'malformed' | 'duplicate' | 'gt_raised' | 'gt_sandbox_error' | 'gt_not_run';

export interface ValidatedTest {
  id: string;
  status: TestStatus;
  reason: ValidationReason;
  /** Normalized call, when the statement has the assert form. */
  call?: string;
  /** GT's repr: the oracle value for usable tests. */
  oracleRepr?: string;
  /** The GT-corrected normalized statement (`assert call == oracle`): dedup and Mistake Book key. */
  key?: string;
}

export interface SuiteValidation {
  tests: ValidatedTest[];
  /** Tests of the response (the release's total_testcase_count): malformed ones only where
   * they count (read outside a code block). */
  total: number;
  /** Usable tests: valid + corrected (|valid_t|). */
  validCount: number;
  /** invalid_t: counted malformed lines + GT raised + duplicates + corrected (counted invalid,
   * still used). */
  invalidCount: number;
  /** Tests whose GT run hit a sandbox error: counted neither way. */
  unknownCount: number;
}

/** Where a response's statements were read (src/core/response-tests.ts): in a ```python block,
 * a statement that is not a test is dropped without counting; outside one, it is a malformed
 * test, counted in invalid_t and in the total. */
export type StatementSource = 'fenced' | 'bare';

/**
 * Code-A1 test validation, in the released order: a statement not of the form
 * `assert <call> == <expr>` is malformed (dropped; counted in invalid_t and the total only when
 * read outside a code block, `source: 'bare'`); one that makes GT raise is invalid and dropped;
 * one whose GT-corrected statement repeats an earlier one is invalid and dropped (counted once);
 * otherwise it is used with GT's output as the oracle, and also counted invalid when its stated
 * expected value differs from GT's.
 */
export function validateSuite(items: readonly GeneratedAssert[], options: { source?: StatementSource } = {}): SuiteValidation {
  const parsed = parseWith(z.array(GeneratedAssert), items, 'generated tests');
  const counted = options.source === 'bare';
  let dropped = 0;
  const seen = new Set<string>();
  const tests: ValidatedTest[] = [];
  let validCount = 0;
  let invalidCount = 0;
  let unknownCount = 0;
  for (const item of parsed) {
    const form = parseAssertCall(item.text);
    if (form === null) {
      // Inside a code block the release's extractor skips it; outside, it counts.
      tests.push({ id: item.id, status: 'invalid', reason: 'malformed' });
      if (counted) invalidCount++;
      else dropped++;
      continue;
    }
    const gt = item.gt;
    if (gt === undefined) {
      // A well-formed test that was never run on GT cannot be judged: treat as unknown, loudly.
      tests.push({ id: item.id, status: 'unknown', reason: 'gt_not_run', call: form.call });
      unknownCount++;
      continue;
    }
    if (gt.kind === 'sandbox_error') {
      tests.push({ id: item.id, status: 'unknown', reason: 'gt_sandbox_error', call: form.call });
      unknownCount++;
      continue;
    }
    if (gt.kind === 'raised') {
      tests.push({ id: item.id, status: 'invalid', reason: 'gt_raised', call: form.call });
      invalidCount++;
      continue;
    }
    const key = correctedStatement(gt.call ?? form.call, gt.repr);
    if (seen.has(key)) {
      tests.push({ id: item.id, status: 'invalid', reason: 'duplicate', call: form.call, oracleRepr: gt.repr, key });
      invalidCount++;
      continue;
    }
    seen.add(key);
    validCount++;
    if (gt.matchesStated) {
      tests.push({ id: item.id, status: 'valid', reason: 'ok', call: form.call, oracleRepr: gt.repr, key });
    } else {
      invalidCount++;
      tests.push({ id: item.id, status: 'corrected', reason: 'corrected', call: form.call, oracleRepr: gt.repr, key });
    }
  }
  return { tests, total: parsed.length - dropped, validCount, invalidCount, unknownCount };
}

/**
 * validateSuite of a whole test-policy response: its tests read as the release reads them
 * (src/core/response-tests.ts; ids are their positions), each test's GT outcome given by `gt`
 * (called with the statement read; undefined: not run). Malformed lines reach it only from
 * outside a code block, and count.
 */
export function validateResponse(
  response: string,
  gt: (statement: { text: string; call: string; expected: string }) => GtOutcome | undefined,
): SuiteValidation & { statements: string[] } {
  const read = readResponseTests(response);
  const items = read.statements.map((st, i): GeneratedAssert => {
    const outcome = st.form ? gt({ text: st.text, call: st.form.call, expected: st.form.expected }) : undefined;
    return { id: String(i), text: st.text, ...(outcome ? { gt: outcome } : {}) };
  });
  return { ...validateSuite(items, { source: read.source }), statements: read.statements.map((st) => st.text) };
}

// ---------------------------------------------------------------------------------------------
// Valid programs: the module body ran to the end

/** Code-A1's "c is a valid program": its module body ran to the end. Without a probe verdict,
 * what the rows can tell: a compile error anywhere means the module never loaded. */
export function codeA1ProgramValid(load: ModuleLoad, row: readonly (Verdict | null)[]): boolean {
  if (load === 'ran') return true;
  if (load === 'unknown') return !row.includes('compile_error');
  return false;
}

// ---------------------------------------------------------------------------------------------
// Judging generated tests (the Judge's form of validateSuite, over recorded verdicts)

/** The release keeps only `assert <call> == <expr>`: a test must state its expected value. */
export function codeA1HasExpected(test: TestCase): boolean {
  if (test.style === 'stdio') return test.output !== null;
  if (test.style === 'call') return Object.prototype.hasOwnProperty.call(test, 'expected') && test.expected !== undefined;
  return parseAssertCall(test.code) !== null;
}

export type JudgedReason =
  'ok' | 'malformed' | 'no-expected' | 'duplicate' | 'reference-raises' | 'reference-timeout' | 'expected-mismatch' | 'reference-sandbox-error';

export interface GeneratedTestRecord {
  id: string;
  suite: string;
  /** It parsed as a test of the problem's style. */
  wellFormed: boolean;
  /** It states an expected value (codeA1HasExpected). */
  hasExpected: boolean;
  /** The reference's verdict on it as stated (null: not run). */
  reference: Verdict | null;
  /** Key of the GT-corrected test (the stated input with the reference's output), when the
   * reference produced a usable output; null otherwise. */
  correctedKey: string | null;
}

export interface JudgedGeneratedTest {
  id: string;
  status: TestStatus;
  reason: JudgedReason;
}

/**
 * Code-A1 validity of generated tests, in the release's order: not a test, or no expected value
 * -> invalid; the reference raises or times out -> invalid; the reference could not run ->
 * unknown; a GT-corrected statement already seen in the same suite -> invalid duplicate (so one
 * input stated with two expected values counts once); else valid, or corrected when the stated
 * value differs from the reference's output (counted invalid, still used with GT's output).
 */
export function codeA1JudgeTests(tests: readonly GeneratedTestRecord[]): JudgedGeneratedTest[] {
  const seen = new Map<string, Set<string>>();
  return tests.map((t): JudgedGeneratedTest => {
    if (!t.wellFormed) return { id: t.id, status: 'invalid', reason: 'malformed' };
    if (!t.hasExpected) return { id: t.id, status: 'invalid', reason: 'no-expected' };
    switch (t.reference) {
      case 'accepted':
      case 'wrong_answer':
        break;
      case 'time_limit':
        return { id: t.id, status: 'invalid', reason: 'reference-timeout' };
      case 'sandbox_error':
      case null:
        return { id: t.id, status: 'unknown', reason: 'reference-sandbox-error' };
      default:
        return { id: t.id, status: 'invalid', reason: 'reference-raises' };
    }
    if (t.correctedKey === null) return { id: t.id, status: 'unknown', reason: 'reference-sandbox-error' };
    let keys = seen.get(t.suite);
    if (!keys) seen.set(t.suite, (keys = new Set()));
    if (keys.has(t.correctedKey)) return { id: t.id, status: 'invalid', reason: 'duplicate' };
    keys.add(t.correctedKey);
    return t.reference === 'accepted' ? { id: t.id, status: 'valid', reason: 'ok' } : { id: t.id, status: 'corrected', reason: 'expected-mismatch' };
  });
}

/**
 * invalid_t of one suite from its judged tests: malformed lines, tests without an expected
 * value, tests the reference raises or times out on, duplicates, and corrected tests (counted
 * invalid, still used). A sampled suite holds a malformed line only where the release counts
 * one (an `assert` line outside a code block): the reading of the answer
 * (src/core/response-tests.ts) drops the asserts of a code block that are not tests before they
 * become tests. Unknown tests (the reference's run was lost to a sandbox error) count neither
 * way.
 */
export function codeA1InvalidCount(judged: readonly { status: TestStatus; reason: string }[]): number {
  return judged.filter((t) => t.status === 'invalid' || t.status === 'corrected').length;
}

// ---------------------------------------------------------------------------------------------
// Rewards of one (program, suite)

export type CodeA1Case = 'hist+gen' | 'hist' | 'gen' | 'none';

export interface CodeA1SuiteInput {
  /** c's outcomes on the suite's usable tests, in suite order (unknown = sandbox error / not run). */
  gen: readonly Outcome[];
  /** |valid_t|: usable tests of the suite. Defaults to gen.length. */
  validCount?: number;
  /** invalid_t. */
  invalidCount: number;
  /** c's outcomes on the replayed Mistake Book tests, best first (capped at histCap). */
  hist: readonly Outcome[];
  /** c is a valid program (its module loaded). */
  programValid: boolean;
  /** nonprintableRatio of the test-policy response that produced the suite. */
  nonprintableRatio: number;
}

export interface CodeA1SuiteReward {
  validRatio: number;
  genPass: number;
  genFail: number;
  histPass: number;
  histFail: number;
  case: CodeA1Case;
  pass: number;
  attack: number;
  nonprintableRatio: number;
  programValid: boolean;
  /** R_test(c, t). */
  rTest: number;
  counts: {
    valid: number;
    invalid: number;
    genObserved: number;
    genPassed: number;
    genFailedInWindow: number;
    histObserved: number;
    histPassed: number;
    /** Cells left out as sandbox errors / not run (gen + hist). */
    unknown: number;
  };
}

function checkCount(n: number, what: string): void {
  if (!Number.isInteger(n) || n < 0) throw new RewardInputError(`${what} must be a non-negative integer, got ${String(n)}`);
}

export function codeA1SuiteReward(input: CodeA1SuiteInput, options: CodeA1OptionsInput = {}): CodeA1SuiteReward {
  return suiteReward(input, parseWith(CodeA1Options, options, 'Code-A1 options'));
}

/** codeA1SuiteReward with its options parsed (once per matrix, not once per suite). */
function suiteReward(input: CodeA1SuiteInput, o: CodeA1Options): CodeA1SuiteReward {
  const validCount = input.validCount ?? input.gen.length;
  checkCount(validCount, 'validCount');
  checkCount(input.invalidCount, 'invalidCount');
  if (input.gen.length !== validCount) {
    throw new RewardInputError(`gen has ${input.gen.length} outcomes but validCount is ${validCount}`);
  }
  if (!Number.isFinite(input.nonprintableRatio) || input.nonprintableRatio < 0 || input.nonprintableRatio > 1) {
    throw new RewardInputError(`nonprintableRatio must be in [0, 1], got ${String(input.nonprintableRatio)}`);
  }
  const cap = o.suiteCap;
  const validRatio = Math.max(0, Math.min(1, validCount / cap, 1 - input.invalidCount / cap));

  const genCounts = countOutcomes(input.gen);
  const genPass = genCounts.observed === 0 ? 0 : genCounts.passed / genCounts.observed;
  let inWindow = 0;
  let failedInWindow = 0;
  for (const g of input.gen) {
    if (inWindow >= cap) break;
    if (g === 'unknown') continue;
    inWindow++;
    if (g === 'fail') failedInWindow++;
  }
  const genFail = failedInWindow / cap;

  const hist = input.hist.slice(0, o.histCap);
  const histCounts = countOutcomes(hist);
  const histPass = histCounts.observed === 0 ? 0 : histCounts.passed / histCounts.observed;
  const histFail = histCounts.observed === 0 ? 0 : 1 - histPass;

  const hasHist = histCounts.observed > 0;
  const hasGen = genCounts.observed > 0;
  let kase: CodeA1Case;
  let pass: number;
  let attack: number;
  if (hasHist && hasGen) {
    kase = 'hist+gen';
    pass = (histPass + genPass) / 2;
    attack = (genFail - histFail + 1) / 2;
  } else if (hasHist) {
    kase = 'hist';
    pass = histPass;
    attack = 0;
  } else if (hasGen) {
    kase = 'gen';
    pass = genPass;
    attack = genFail;
  } else {
    kase = 'none';
    pass = 0;
    attack = 0;
  }
  const rTest = -input.nonprintableRatio + (input.programValid ? o.alpha * validRatio + (1 - o.alpha) * attack : 0);
  return {
    validRatio,
    genPass,
    genFail,
    histPass,
    histFail,
    case: kase,
    pass,
    attack,
    nonprintableRatio: input.nonprintableRatio,
    programValid: input.programValid,
    rTest,
    counts: {
      valid: validCount,
      invalid: input.invalidCount,
      genObserved: genCounts.observed,
      genPassed: genCounts.passed,
      genFailedInWindow: failedInWindow,
      histObserved: histCounts.observed,
      histPassed: histCounts.passed,
      unknown: genCounts.unknown + histCounts.unknown,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Rewards from an execution matrix

export const CodeA1Suite = z.object({
  /** Suite id, as in TestInfo.suite. */
  id: z.string().min(1),
  /** The program the suite was written against (white-box); only it is scored on the suite. */
  program: z.string().min(1),
  /** invalid_t from validateSuite. */
  invalidCount: z.number().int().nonnegative(),
  /** nonprintableRatio of the response. */
  nonprintableRatio: z.number().min(0).max(1),
});
export type CodeA1Suite = z.infer<typeof CodeA1Suite>;
/** Built once: a zod schema costs more to build than to check a few suites with. */
const CodeA1Suites = z.array(CodeA1Suite);
/** Suite lists checked already (the schema has no defaults: the checked list is the input). A
 * judgement's suites are built once and rewarded under several settings (ablation): checked once. */
const checkedSuites = new WeakSet<readonly CodeA1Suite[]>();

export interface CodeA1SuiteResult extends CodeA1SuiteReward {
  suite: string;
  program: string;
}

export interface CodeA1ProgramResult {
  program: string;
  programValid: boolean;
  /** R_code(c). */
  rCode: number;
  suites: CodeA1SuiteResult[];
}

export interface CodeA1Result {
  rewardId: typeof CODE_A1_ID;
  programs: CodeA1ProgramResult[];
}

export interface CodeA1Input {
  matrix: ExecutionMatrix;
  suites: readonly CodeA1Suite[];
}

/**
 * Code-A1 rewards for every non-reference program of the matrix (matrix order) and each of its
 * suites (input order). The suite's usable tests are the tests with that suite id and status
 * valid/corrected, in matrix order; hist is the usable tests of `histSuite`, in matrix order
 * (put them best-first, as topTests returns them), first `histCap`.
 * A program with no suite gets R_code from an empty suite: hist_pass when hist exists, else 0.
 */
export function codeA1Rewards(input: CodeA1Input, options: CodeA1OptionsInput = {}): CodeA1Result {
  const o = parseWith(CodeA1Options, options, 'Code-A1 options');
  const suites = checkedSuites.has(input.suites) ? input.suites : parseWith(CodeA1Suites, input.suites, 'Code-A1 suites');
  checkedSuites.add(input.suites);
  const m = input.matrix;
  const programIds = new Set(m.programs.map((p) => p.id));
  const seenSuites = new Set<string>();
  for (const s of suites) {
    if (!programIds.has(s.program)) throw new RewardInputError(`suite "${s.id}" names program "${s.program}", not in the matrix`);
    if (seenSuites.has(s.id)) throw new RewardInputError(`suite "${s.id}" is listed twice`);
    if (s.id === o.histSuite) throw new RewardInputError(`suite "${s.id}" has the Mistake Book suite id`);
    seenSuites.add(s.id);
  }
  // Each suite's usable tests, in matrix order, from one pass over the tests.
  const bySuite = new Map<string, number[]>();
  m.tests.forEach((t, i) => {
    if (!isUsable(t.status)) return;
    const list = bySuite.get(t.suite);
    if (list) list.push(i);
    else bySuite.set(t.suite, [i]);
  });
  const histTests = (bySuite.get(o.histSuite) ?? []).slice(0, o.histCap);
  const programs: CodeA1ProgramResult[] = [];
  for (const p of candidateIndices(m)) {
    const info = m.programs[p]!;
    const hist = passVector(m, p, histTests);
    const own = suites.filter((s) => s.program === info.id);
    const results: CodeA1SuiteResult[] = own.map((s) => {
      const gen = passVector(m, p, bySuite.get(s.id) ?? []);
      const r = suiteReward({ gen, invalidCount: s.invalidCount, hist, programValid: info.valid, nonprintableRatio: s.nonprintableRatio }, o);
      return { suite: s.id, program: info.id, ...r };
    });
    const rCode =
      results.length > 0
        ? meanInOrder(results.map((r) => r.pass))
        : suiteReward({ gen: [], invalidCount: 0, hist, programValid: info.valid, nonprintableRatio: 0 }, o).pass;
    programs.push({ program: info.id, programValid: info.valid, rCode, suites: results });
  }
  return { rewardId: CODE_A1_ID, programs };
}

// ---------------------------------------------------------------------------------------------
// Sample selection

function populationStd(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const mean = sumInOrder(xs) / xs.length;
  return Math.sqrt(sumInOrder(xs.map((x) => (x - mean) * (x - mean))) / xs.length);
}

export interface TopVarSelection {
  /** Indices into the input, best first. */
  selected: number[];
  /** Population std of each input group's rewards. */
  stds: number[];
}

/**
 * TOPVAR: keep the `keep` groups (one per program: the R_test of its suites) whose rewards
 * have the largest population std (torch.std(unbiased=False) in the released trainer, update_n =
 * 1). Ties go to the earlier program, so the choice is deterministic.
 */
export function topVar(groups: readonly (readonly number[])[], keep = 1): TopVarSelection {
  if (!Number.isInteger(keep) || keep < 1) throw new RewardInputError(`keep must be a positive integer, got ${String(keep)}`);
  const stds = groups.map((g) => populationStd(g));
  const order = stds.map((s, i) => ({ s, i })).sort((a, b) => (b.s !== a.s ? b.s - a.s : a.i - b.i));
  return { selected: order.slice(0, keep).map((x) => x.i), stds };
}

/** TOPVAR over a Code-A1 result: the suite ids to train the test policy on, in program order
 * of the selected programs. Programs without suites are never selected. */
export function codeA1TopVarSuites(result: CodeA1Result, keep = 1): string[] {
  const withSuites = result.programs.filter((p) => p.suites.length > 0);
  const { selected } = topVar(
    withSuites.map((p) => p.suites.map((s) => s.rTest)),
    keep,
  );
  return selected
    .slice()
    .sort((a, b) => a - b)
    .flatMap((i) => withSuites[i]!.suites.map((s) => s.suite));
}

/**
 * Advantages of one problem's code group and whether it trains. The release defines a filter
 * that drops groups whose rewards are all 0 or all 1 but never calls it: off unless
 * `filterUniform`. A kept uniform group trains with zero advantages.
 */
export function codeA1CodeSelection(
  rCodes: readonly number[],
  options: { std: NonNullable<AdvantageOptionsInput['std']>; filterUniform?: boolean },
): { kept: boolean; advantages: number[] } {
  const kept = options.filterUniform === true ? codeA1KeepCodeGroup(rCodes) : rCodes.length > 0;
  return { kept, advantages: kept ? groupAdvantages(rCodes, { std: options.std }) : rCodes.map(() => 0) };
}

/**
 * The released trainer's filter (defined, never called): drops a problem's code samples from the code-policy batch when every
 * R_code is 1 or every R_code is 0 (within 1e-6): they carry no learning signal.
 */
export function codeA1KeepCodeGroup(rCodes: readonly number[], tolerance = 1e-6): boolean {
  if (rCodes.length === 0) return false;
  const allOne = rCodes.every((r) => Math.abs(r - 1) < tolerance);
  const allZero = rCodes.every((r) => Math.abs(r) < tolerance);
  return !(allOne || allZero);
}
