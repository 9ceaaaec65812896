/**
 * What a worker needs, read from the log: the config recorded in RunStarted and the problems
 * by the blob hashes it names. The catalog policy's candidates are derived from the bundled
 * problems and the seed (read from the shared cache when the run's starter built it there).
 */
import path from 'node:path';
import type { EventLog } from '../events/log.js';
import type { EventData } from '../events/catalog.js';
import { Problem } from '../core/problem.js';
import { canonicalJson } from '../core/canonical-json.js';
import type { RunConfig } from '../config/schema.js';
import { configOf } from '../actors/events.js';
import { prepareRun } from '../actors/sources.js';
import { RunEnv, type PolicyBackend } from '../actors/env.js';
import type { Sandbox } from '../sandbox/api.js';
import { RunNotFoundError, WorkerError } from './errors.js';

export interface RunFromLog {
  config: RunConfig;
  problems: Problem[];
  env: RunEnv;
  backend: PolicyBackend;
}

export async function runStartedOf(log: EventLog, runId: string): Promise<{ config: RunConfig; data: EventData<'RunStarted'> } | null> {
  for await (const e of log.read({ limit: 1 }, { runId, types: ['RunStarted'] })) {
    return { config: configOf(e), data: e.data as EventData<'RunStarted'> };
  }
  return null;
}

/** `cacheDir`: where built catalogs are cached (default the config's dir/.cache, as `run`). */
export async function loadRunFromLog(
  log: EventLog,
  runId: string,
  sandbox: Sandbox,
  opts: { cacheDir?: string | null; dir?: string } = {},
): Promise<RunFromLog> {
  const started = await runStartedOf(log, runId);
  if (!started) throw new RunNotFoundError(runId, log.location);
  const { config, data } = started;
  const texts = new Map<string, string>();
  for (const ref of data.problems) texts.set(ref.problemId, await log.blobs.getText(ref.problemHash));
  const problems = [...texts.values()].map((t) => Problem.parse(JSON.parse(t)));
  const dir = opts.dir ?? path.join(config.dir, runId);
  // The catalog the run recorded, read by hash (the local cache or a build only for runs that recorded none).
  const prepared = await prepareRun(config, opts.cacheDir === undefined ? path.join(config.dir, '.cache') : opts.cacheDir, sandbox, dir, {
    blobs: log.blobs,
    hash: data.catalogHash ?? null,
  });
  // The recorded problems are the run's; the local derivation must agree with them, or the
  // catalog this process built belongs to another dataset.
  const local = new Map(prepared.problems.map((p) => [p.id, canonicalJson(p)]));
  for (const [id, text] of texts) {
    if (local.get(id) !== text) {
      await prepared.backend.close?.();
      throw new WorkerError(
        `problem ${id} recorded in run ${runId} differs from the one this crucible derives from the bundled set; run the worker with the crucible version that started the run`,
      );
    }
  }
  const env = new RunEnv({ runId, config, blobs: log.blobs, sandbox, backend: prepared.backend, problems });
  return { config, problems, env, backend: prepared.backend };
}
