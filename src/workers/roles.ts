/**
 * The roles a worker process can play, and the `--workers` spec of `crucible run`
 * ("executor=2,judge=1": how many processes of each role; every role not named runs one).
 */
import { z } from 'zod';
import { WorkerUsageError } from './errors.js';
import { MAX_JUDGE_SHARES } from '../core/judge-shares.js';

export const WORKER_ROLES = ['conductor', 'solver', 'adversary', 'executor', 'judge', 'learner'] as const;
export const WorkerRole = z.enum(WORKER_ROLES);
export type WorkerRole = z.infer<typeof WorkerRole>;

/** Roles whose work is split among its processes through a task queue (executors per program,
 * samplers per effect); every other role is a singleton: one live process (fenced by a lease),
 * the others standing by; except that `judge=K` runs K live judges, each owning a share of the
 * problems (core/judge-shares.ts). */
export const SHARED_ROLES: ReadonlySet<WorkerRole> = new Set(['solver', 'adversary', 'executor']);

export const isSamplerRole = (role: WorkerRole): role is 'solver' | 'adversary' => role === 'solver' || role === 'adversary';

export function parseRole(role: string): WorkerRole {
  const r = WorkerRole.safeParse(role);
  if (!r.success) throw new WorkerUsageError(`--role ${role}: expected one of ${WORKER_ROLES.join(', ')}`);
  return r.data;
}

/** Processes per role from "executor=2,judge=1"; roles not named get one. */
export function parseWorkerCounts(spec: string): Record<WorkerRole, number> {
  const counts = Object.fromEntries(WORKER_ROLES.map((r) => [r, 1])) as Record<WorkerRole, number>;
  const seen = new Set<string>();
  for (const part of spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)) {
    const m = /^([a-z]+)=(\d+)$/.exec(part);
    if (!m) throw new WorkerUsageError(`--workers "${spec}": "${part}" is not role=count (e.g. executor=2,judge=1)`);
    const role = WorkerRole.safeParse(m[1]);
    if (!role.success) throw new WorkerUsageError(`--workers "${spec}": unknown role "${m[1]}" (roles: ${WORKER_ROLES.join(', ')})`);
    if (seen.has(role.data)) throw new WorkerUsageError(`--workers "${spec}": ${role.data} is named twice`);
    seen.add(role.data);
    const n = Number(m[2]);
    if (n < 1 || n > 64) throw new WorkerUsageError(`--workers "${spec}": ${role.data}=${n}: every role needs 1 to 64 processes`);
    if (role.data === 'judge' && n > MAX_JUDGE_SHARES)
      throw new WorkerUsageError(`--workers "${spec}": judge=${n}: the Judge splits in at most ${MAX_JUDGE_SHARES} shares`);
    counts[role.data] = n;
  }
  return counts;
}
