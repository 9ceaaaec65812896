/**
 * The faults of one chaos run, drawn from a seed: which fault, on what, and at which point of the
 * run's progress. Progress is counted in (program, test) pairs executed, as the log says them
 * (every pair once, so a run with faults reaches the same total as the run without). Faults are
 * spaced by at least `spacing` pairs and none falls in the last `tail` pairs, so each has healed
 * before the next and before the run ends.
 */
import { Rng } from '../src/core/rng.js';

export const FAULT_KINDS = ['kill-worker', 'kill-server', 'stop-server', 'partition'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** The roles whose processes a chaos run kills: the supervisor starts each again. */
export const KILLED_ROLES = ['executor', 'solver', 'adversary', 'judge'] as const;
export type KilledRole = (typeof KILLED_ROLES)[number];

/** How long a partition lasts. */
export const PARTITION_MS = 10_000;

export type Fault =
  /** SIGKILL of the worker process of `role` in `slot`. */
  | { kind: 'kill-worker'; at: number; role: KilledRole; slot: number }
  /** SIGKILL of a nats-server, started again `downMs` later. */
  | { kind: 'kill-server'; at: number; server: string; downMs: number }
  /** SIGSTOP of a nats-server, SIGCONT `forMs` later. */
  | { kind: 'stop-server'; at: number; server: string; forMs: number }
  /** A server's host cut off the network for `forMs` (on loopback: the server frozen). */
  | { kind: 'partition'; at: number; server: string; forMs: number };

export interface ChaosOptions {
  /** Pairs the whole run executes. */
  total: number;
  /** How many faults. */
  faults: number;
  /** Fewest pairs between two faults, and before the first. */
  spacing: number;
  /** Pairs at the end of the run left without faults. */
  tail: number;
  /** The cluster's servers by name. */
  servers: readonly string[];
  /** Processes of each role that may be killed (a role absent or at 0 is not killed). */
  processes: Partial<Record<KilledRole, number>>;
}

export class ChaosScheduleError extends Error {
  constructor(message: string) {
    super(`chaos schedule: ${message}`);
    this.name = 'ChaosScheduleError';
  }
}

const isCount = (n: number, min: number) => Number.isInteger(n) && n >= min;

function check(seed: number, opts: ChaosOptions): void {
  if (!isCount(seed, 0) || seed > 0xffffffff) throw new ChaosScheduleError(`seed ${seed}: expected an integer in [0, 2^32)`);
  for (const [name, min] of [
    ['total', 1],
    ['faults', 1],
    ['spacing', 1],
    ['tail', 0],
  ] as const) {
    if (!isCount(opts[name], min)) throw new ChaosScheduleError(`${name} ${opts[name]}: expected an integer of at least ${min}`);
  }
  if (opts.servers.length === 0) throw new ChaosScheduleError('no servers to fault');
  for (const [role, n] of Object.entries(opts.processes)) {
    if (!(KILLED_ROLES as readonly string[]).includes(role))
      throw new ChaosScheduleError(`processes: unknown role "${role}" (roles: ${KILLED_ROLES.join(', ')})`);
    if (!isCount(n, 0)) throw new ChaosScheduleError(`processes.${role} ${n}: expected an integer of at least 0`);
  }
  const room = opts.total - opts.tail;
  if (opts.faults * opts.spacing > room)
    throw new ChaosScheduleError(
      `${opts.faults} faults ${opts.spacing} pairs apart need ${opts.faults * opts.spacing} pairs before the last ${opts.tail}; the run has ${opts.total}`,
    );
}

/**
 * The faults for `seed`, in the order they fire. Kinds come round in a shuffled order, so that
 * four faults or more make every kind once; the points are drawn uniformly among those that keep
 * the spacing.
 */
export function chaosSchedule(seed: number, opts: ChaosOptions): Fault[] {
  check(seed, opts);
  const rng = Rng.derive(seed, 'chaos');
  const roles = KILLED_ROLES.filter((r) => (opts.processes[r] ?? 0) > 0);
  const kinds: FaultKind[] = [];
  while (kinds.length < opts.faults) kinds.push(...rng.shuffle(FAULT_KINDS.filter((k) => k !== 'kill-worker' || roles.length > 0)));
  // Points at spacing * (i + 1) + u_i, with u sorted in [0, slack]: gaps of at least `spacing`.
  const slack = opts.total - opts.tail - opts.faults * opts.spacing;
  const offsets = Array.from({ length: opts.faults }, () => rng.between(0, slack)).sort((a, b) => a - b);
  return offsets.map((u, i): Fault => {
    const at = opts.spacing * (i + 1) + u;
    const kind = kinds[i]!;
    switch (kind) {
      case 'kill-worker': {
        const role = rng.pick(roles);
        return { kind, at, role, slot: rng.int(opts.processes[role]!) };
      }
      case 'kill-server':
        return { kind, at, server: rng.pick(opts.servers), downMs: rng.between(1000, 4000) };
      case 'stop-server':
        return { kind, at, server: rng.pick(opts.servers), forMs: rng.between(2000, 8000) };
      case 'partition':
        return { kind, at, server: rng.pick(opts.servers), forMs: PARTITION_MS };
    }
  });
}

/** A fault in a few words, for the report. */
export function describeFault(f: Fault): string {
  switch (f.kind) {
    case 'kill-worker':
      return `SIGKILL ${f.role}/${f.slot}`;
    case 'kill-server':
      return `SIGKILL ${f.server}, restart after ${(f.downMs / 1000).toFixed(1)} s`;
    case 'stop-server':
      return `SIGSTOP ${f.server} for ${(f.forMs / 1000).toFixed(1)} s`;
    case 'partition':
      return `partition ${f.server} for ${(f.forMs / 1000).toFixed(0)} s`;
  }
}
