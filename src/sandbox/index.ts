import { existsSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Sandbox } from './api.js';
import { bwrapWorks, findBwrap, type IsolationChoice } from './isolation.js';
import { cgroupRoots } from './cgroup.js';
import { DEFAULT_LIMITS, resolveLimits, type SandboxLimits } from './limits.js';
import { ServerPool } from './pool.js';
import { ForkServerSandbox } from './sandbox.js';
import { TextComparer } from './text-compare.js';
import { SandboxSetupError } from './errors.js';

export type { Sandbox, RunRequest, TestResult, Verdict, ComparisonMode, IsolationLayers } from './api.js';
export { isolationReport, type IsolationReport } from './isolation.js';
export { VERDICTS } from './api.js';
export { DEFAULT_LIMITS, type SandboxLimits } from './limits.js';
export { SandboxInputError, SandboxSetupError } from './errors.js';

export interface CreateSandboxOptions {
  /** Interpreter for candidate programs; default /usr/bin/python3 (Debian's). */
  pythonPath?: string;
  /** Fork-servers running tests at once; default two per core (see defaultWorkers). */
  workers?: number;
  /** 'auto': bubblewrap when it works here, else rlimits with a warning. 'bwrap': required. */
  isolation?: IsolationChoice;
  defaultLimits?: Partial<SandboxLimits>;
  /** Where the no-bubblewrap warning goes; default stderr. */
  warn?: (message: string) => void;
  /** First unprivileged uid for candidates (one per server slot); default derived from the pid
   * so that sandboxes of concurrent processes do not share uids (and thread budgets). */
  uidBase?: number;
  /** Fail closed: refuse to start unless bubblewrap isolates the fork-servers (an unisolated
   * verdict is then impossible). Runs that train a model set this unless their configuration
   * says `executor.isolation: none` explicitly. */
  requireIsolation?: boolean;
  /** Memory and pids cgroups per fork-server where this process can make them; default true. */
  cgroups?: boolean;
}

export const SERVER_PATH = fileURLToPath(new URL('./python/forkserver.py', import.meta.url));

/** Fork-servers per sandbox: two per core. A server spends part of each test forking and
 * waiting, so one per core leaves the cores idle about a third of the time (measured: 533 vs
 * 708 trivial runs/s on 2 cores with bubblewrap). Verdicts stay fair: the time limit is CPU
 * time, and the wall-clock kill allows 2 x the CPU limit + 1 s. */
export function defaultWorkers(): number {
  return Math.max(1, 2 * os.availableParallelism());
}

export async function createSandbox(options: CreateSandboxOptions = {}): Promise<Sandbox> {
  const pythonPath = options.pythonPath ?? '/usr/bin/python3';
  if (!existsSync(pythonPath)) throw new SandboxSetupError(`sandbox: python interpreter not found at ${pythonPath}`);
  const workers = options.workers ?? defaultWorkers();
  if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`sandbox: workers must be a positive integer, got ${workers}`);
  const defaultLimits = resolveLimits(DEFAULT_LIMITS, options.defaultLimits);
  const choice = options.isolation ?? 'auto';
  const warn = options.warn ?? ((m: string) => process.stderr.write(`crucible: warning: ${m}\n`));
  if (options.requireIsolation && choice === 'none') {
    throw new SandboxSetupError('sandbox: isolation is required but isolation "none" was asked for');
  }
  let bwrap: string | undefined;
  if (choice !== 'none') {
    const found = findBwrap();
    const check = found ? bwrapWorks(found, pythonPath, SERVER_PATH) : { ok: false, reason: 'bwrap is not installed' };
    if (check.ok) bwrap = found;
    else if (choice === 'bwrap' || options.requireIsolation) {
      throw new SandboxSetupError(
        `sandbox: bubblewrap isolation ${options.requireIsolation ? 'is required (a run that trains refuses unisolated verdicts; set executor.isolation: none to accept them)' : 'requested'} but unavailable: ${check.reason}`,
      );
    } else
      warn(
        `bubblewrap unavailable (${check.reason}); untrusted programs run with rlimits, seccomp and a dropped uid only, and every verdict says isolated=false`,
      );
  }
  const cgroup = options.cgroups === false ? undefined : cgroupRoots();
  // Two uids per server slot (candidates, and oracles and checkers), 128 slots per process.
  const uidBase = options.uidBase ?? 200_000 + (process.pid % 100_000) * 256;
  const base = { pythonPath, serverPath: SERVER_PATH, bwrap, uidBase, ...(cgroup ? { cgroup } : {}) };
  const pool = new ServerPool(workers, base, 0);
  // References run on servers no candidate touched. Servers start on first use.
  const refSize = Math.max(1, Math.ceil(workers / 4));
  const reference = new ServerPool(refSize, base, workers);
  return new ForkServerSandbox({
    pool,
    reference,
    isolation: bwrap ? 'bwrap' : 'rlimits',
    cgroup: cgroup !== undefined,
    defaultLimits,
    text: new TextComparer(Math.max(1, Math.min(2, workers))),
  });
}
