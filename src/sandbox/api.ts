/**
 * The sandbox's public contract. The Executor actor, `crucible exec` and `crucible data check`
 * use only what this file declares; src/sandbox/index.ts provides `createSandbox`.
 */
import type { TestCase } from '../core/problem.js';
import type { Verdict } from '../core/verdicts.js';
import type { SandboxLimits } from './limits.js';

export { VERDICTS, type Verdict } from '../core/verdicts.js';

export type ComparisonMode = 'exact' | 'tokens' | 'float' | 'checker';

export interface RunRequest {
  /** Python 3 source of the candidate program. */
  program: string;
  /** All tests must share one style. A test without an expected value is only executed:
   * its verdict says whether it ran cleanly, and `output` carries what it produced. */
  tests: readonly TestCase[];
  /** Function to call for call-style tests ("f", or "Solution.method"). */
  entryPoint?: string;
  /** Per-test limits; `timeSeconds`/`memoryMb` as problems carry them, plus wall, output, threads. */
  limits?: Partial<SandboxLimits>;
  comparison?: ComparisonMode;
  /** Python source of a checker, for comparison = 'checker'. */
  checker?: string;
  /** Stop at the first test that is not accepted; the rest are not run and not returned. */
  stopOnFirstFailure?: boolean;
  /** 'reference': a trusted solution (the reference, an oracle run); it runs on fork-servers of
   * its own, never shared with candidates. Default 'candidate'. */
  role?: 'candidate' | 'reference';
  /** Pre-import the names LeetCode/APPS harnesses provide (typing's List, collections, math...).
   * Default: on for call-style tests, off otherwise. */
  prelude?: boolean;
}

export interface TestResult {
  /** Index into RunRequest.tests. */
  test: number;
  verdict: Verdict;
  timeMs: number;
  memoryKb: number;
  /** What the program produced: stdout for stdio tests, the JSON-serialized return value for
   * call tests (truncated to a bounded size). Absent when it produced nothing usable. */
  output?: string;
  /** runtime_error: exception type (e.g. "ZeroDivisionError") and a short message. */
  exceptionType?: string;
  message?: string;
  /** False when the run had rlimits only (no bubblewrap). */
  isolated: boolean;
  /** False when no memory cgroup held the run (RLIMIT_AS was then its only memory limit).
   * Always set by the fork-server sandbox; optional for stand-ins that run nothing. */
  cgroup?: boolean;
  /** Where a failure happened: 'load' while the program's top level ran (call and assert
   * tests; APPS labels it -2, and such a program is invalid for every test), 'test' in the
   * test itself. Absent on accepted verdicts. */
  phase?: 'load' | 'test';
  /** Peak memory of the run in KiB as its cgroup counted it (shared memory, memfds and tmpfs
   * files included); absent without a cgroup. */
  memoryPeakKb?: number;
  /** Wall-clock milliseconds of the run (timeMs is CPU time). */
  wallMs?: number;
  /** Assert tests: always 'outside': the test body ran in the oracle, the candidate's process
   * only answered calls with serialized values. */
  assertMode?: 'outside';
}

/** Which isolation layers the sandbox's fork-servers have (see isolation.ts). */
export interface IsolationLayers {
  bwrap: boolean;
  seccomp: boolean;
  netns: boolean;
  ipcns: boolean;
  mntns: boolean;
  cgroup: boolean;
  uidDrop: boolean;
}

export interface Sandbox {
  readonly isolation: 'bwrap' | 'rlimits';
  /** Whether memory cgroups hold the runs (see TestResult.cgroup). */
  readonly cgroup?: boolean;
  run(request: RunRequest): Promise<TestResult[]>;
  close(): Promise<void>;
}
