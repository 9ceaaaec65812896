import { z } from 'zod';

/** Per-test limits the sandbox enforces. `timeSeconds` and `memoryMb` are what problems carry
 * (datasets/problem.ts); the rest have defaults that suit competitive-programming tests. */
export const SandboxLimits = z.object({
  /** CPU seconds per test. */
  timeSeconds: z.number().positive().max(600),
  /** Address-space budget in MiB on top of the warm interpreter. */
  memoryMb: z.number().positive().max(65536),
  /** Wall-clock seconds per test (catches sleepers); default 2 x timeSeconds + 1. */
  wallSeconds: z.number().positive().max(1200).optional(),
  /** Bytes of stdout (and of any file written) a test may produce. */
  outputBytes: z
    .number()
    .int()
    .positive()
    .max(1 << 30),
  /** Threads the program may run (processes are refused by the seccomp filter). */
  processes: z.number().int().min(1).max(1024),
});
export type SandboxLimits = z.infer<typeof SandboxLimits>;

export const DEFAULT_LIMITS: SandboxLimits = {
  timeSeconds: 2,
  memoryMb: 512,
  outputBytes: 16 << 20,
  processes: 16,
};

/** What the fork-server reads: snake_case, every field present. */
export interface WireLimits {
  cpu_s: number;
  wall_s: number;
  mem_mb: number;
  out_bytes: number;
  nproc: number;
}

/** Merges defaults, sandbox-wide overrides and the request's own limits, then validates them
 * so that a bad number is reported with its field name instead of reaching the child. */
export function resolveLimits(...layers: Array<Partial<SandboxLimits> | undefined>): SandboxLimits {
  const merged: Record<string, unknown> = {};
  for (const layer of layers) {
    for (const [k, v] of Object.entries(layer ?? {})) if (v !== undefined) merged[k] = v;
  }
  const parsed = SandboxLimits.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new RangeError(`invalid sandbox limit ${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

export function toWire(l: SandboxLimits): WireLimits {
  return {
    cpu_s: l.timeSeconds,
    wall_s: l.wallSeconds ?? l.timeSeconds * 2 + 1,
    mem_mb: l.memoryMb,
    out_bytes: l.outputBytes,
    nproc: l.processes,
  };
}
