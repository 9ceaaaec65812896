/**
 * The capacity model of `bench cluster`: a step's time on N nodes of C cores each, from figures
 * measured on one machine. Pure arithmetic, no I/O.
 *
 * The stages of a step overlap (executors run programs while the Judge folds and judges what is
 * already recorded, the Learner collects rewards as they come), so a step takes as long as its
 * slowest bound:
 *  - executors: every core-second of the step's work (sandbox time per pair, the log's round
 *    trip per program, and the CPU the Judge and the Learner spend) spread over all N x C cores:
 *    the executors get whatever cores the singleton roles leave;
 *  - each serial role (the Judge, one process per share; the Learner, one process): its own
 *    per-result work in one thread. Every judge folds the whole log (its fold does not split),
 *    and only the judging work divides by the K shares.
 * The bottleneck is the stage whose bound is the step's time.
 */

/** The size of a step: the config's shape and what a step records per nominal pair. */
export interface StepShape {
  problems: number;
  groupSize: number;
  suitesPerProgram: number;
  suiteSize: number;
  /** Execution results recorded per nominal (program, test) pair (oracle, kill and Mistake Book
   * runs besides the rewards' pairs), measured. */
  resultsPerNominalPair: number;
  /** ProgramExecuted events (one executor task each) per nominal pair, measured. */
  programsPerNominalPair: number;
}

export interface StepWork {
  results: number;
  programs: number;
}

/** One process that does its work in one thread (the Judge per share, the Learner). */
export interface SerialRole {
  name: string;
  /** CPU us per result every process of the role pays (the fold of the whole log). */
  usPerResult: number;
  /** CPU us per result that its shares divide (the Judge's judging); 0 for a role that does not split. */
  splitUsPerResult: number;
  /** Processes sharing the split work (1 for a role that does not split). */
  shares: number;
}

export interface Figures {
  /** Core-ms the sandbox spends per (program, test) pair. */
  sandboxMsPerPair: number;
  /** ms an executor spends on the log per program (publish, claim, append, ack). */
  roundTripMsPerProgram: number;
}

export interface Cluster {
  nodes: number;
  cores: number;
}

export interface Prediction {
  seconds: number;
  /** Seconds of each bound, by stage: 'executors' (all cores) and one per serial role. */
  stages: Record<string, number>;
  /** Of the executors' bound, the parts: sandbox and log round trips (core-seconds / cores). */
  sandboxSeconds: number;
  logSeconds: number;
  bottleneck: string;
}

/** The Judge splits into at most this many shares (`--workers judge=K`). */
export const MAX_JUDGE_SHARES = 16;

export class CapacityInputError extends Error {}

function need(what: string, v: number, { positive = false, integer = false } = {}): void {
  const ok = Number.isFinite(v) && (positive ? v > 0 : v >= 0) && (!integer || Number.isInteger(v));
  if (!ok) throw new CapacityInputError(`${what} must be a ${positive ? 'positive' : 'non-negative'} ${integer ? 'integer' : 'number'}, got ${v}`);
}

export function stepWork(shape: StepShape): StepWork {
  for (const k of ['problems', 'groupSize', 'suitesPerProgram', 'suiteSize'] as const) need(`step shape: ${k}`, shape[k], { positive: true, integer: true });
  need('step shape: resultsPerNominalPair', shape.resultsPerNominalPair, { positive: true });
  need('step shape: programsPerNominalPair', shape.programsPerNominalPair, { positive: true });
  const nominal = shape.problems * shape.groupSize * shape.suitesPerProgram * shape.suiteSize;
  return { results: nominal * shape.resultsPerNominalPair, programs: nominal * shape.programsPerNominalPair };
}

export function predictStep(work: StepWork, figures: Figures, roles: readonly SerialRole[], cluster: Cluster): Prediction {
  need('nodes', cluster.nodes, { positive: true, integer: true });
  need('cores per node', cluster.cores, { positive: true, integer: true });
  need('results per step', work.results, { positive: true });
  need('programs per step', work.programs, { positive: true });
  need('sandbox ms per pair', figures.sandboxMsPerPair);
  need('log round trip ms per program', figures.roundTripMsPerProgram);
  const names = new Set<string>(['executors']);
  for (const r of roles) {
    if (names.has(r.name)) throw new CapacityInputError(`serial role "${r.name}" is named twice (or is named "executors")`);
    names.add(r.name);
    need(`${r.name}: us per result`, r.usPerResult);
    need(`${r.name}: split us per result`, r.splitUsPerResult);
    need(`${r.name}: shares`, r.shares, { positive: true, integer: true });
    if (r.name === 'judge' && r.shares > MAX_JUDGE_SHARES) throw new CapacityInputError(`judge: at most ${MAX_JUDGE_SHARES} shares, got ${r.shares}`);
    if (r.shares > 1 && r.splitUsPerResult === 0) throw new CapacityInputError(`${r.name}: ${r.shares} shares of a role with no work to split`);
  }
  const cores = cluster.nodes * cluster.cores;
  const sandboxCoreSeconds = (work.results * figures.sandboxMsPerPair) / 1000;
  const logCoreSeconds = (work.programs * figures.roundTripMsPerProgram) / 1000;
  const stages: Record<string, number> = {};
  let rolesCoreSeconds = 0;
  for (const r of roles) {
    // Each of its processes folds everything and does its share of the split work.
    stages[r.name] = (work.results * (r.usPerResult + r.splitUsPerResult / r.shares)) / 1e6;
    rolesCoreSeconds += (work.results * (r.usPerResult * r.shares + r.splitUsPerResult)) / 1e6;
  }
  stages.executors = (sandboxCoreSeconds + logCoreSeconds + rolesCoreSeconds) / cores;
  let bottleneck = 'executors';
  for (const [name, s] of Object.entries(stages)) if (s > stages[bottleneck]!) bottleneck = name;
  return { seconds: stages[bottleneck]!, stages, sandboxSeconds: sandboxCoreSeconds / cores, logSeconds: logCoreSeconds / cores, bottleneck };
}

/** The number of judge shares (1..16) with the shortest predicted step; the fewest among equals
 * (within 1%), since each share costs a process that folds the whole log. */
export function bestJudgeShares(work: StepWork, figures: Figures, roles: (shares: number) => SerialRole[], cluster: Cluster): number {
  const times = Array.from({ length: MAX_JUDGE_SHARES }, (_, i) => predictStep(work, figures, roles(i + 1), cluster).seconds);
  const best = Math.min(...times);
  return times.findIndex((t) => t <= best * 1.01) + 1;
}

/** The fewest nodes (up to `limit`) at which a serial role, not the executors, bounds the step;
 * null when the executors bound it up to `limit`. */
export function nodesWhereRoleBounds(work: StepWork, figures: Figures, roles: readonly SerialRole[], cores: number, limit = 4096): number | null {
  for (let n = 1; n <= limit; n++) if (predictStep(work, figures, roles, { nodes: n, cores }).bottleneck !== 'executors') return n;
  return null;
}
