/**
 * Ablation over the other methods' judgements (one tiny run each, real sandbox and log): the
 * recorded settings rebuild the live read models exactly, a judgement key of the method is
 * answered, and an EvolveCoder run is refused with the reason.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../../src/projections/run-views.js';
import { ablate } from '../../src/ablation/ablate.js';
import { parseVariantSpec } from '../../src/ablation/variant.js';
import { AblationError } from '../../src/ablation/errors.js';

let root: string;

function config(method: string, overrides: Record<string, unknown> = {}) {
  return parseConfig({
    name: method,
    method,
    seed: 5,
    rounds: 2,
    dir: root,
    dataset: { format: 'demo', limit: 2 },
    sampling: { problemsPerRound: 2, groupSize: 4, suitesPerProgram: 2, suiteSize: 4, whiteBox: false },
    policies: { code: { lr: 1.0, mutants: 3 }, test: { lr: 1.0, candidates: 16 } },
    selection: { testSamples: 'all' },
    ...overrides,
  });
}

async function ablateRun(method: string, variants: string[]) {
  const out = await runExperiment({ config: config(method), dir: path.join(root, method), cacheDir: path.join(root, 'cache') });
  expect(out.finished).toBe(true);
  const log = await openSqliteLog(path.join(out.dir, 'log.db'), { create: false });
  try {
    const result = await ablate({ log, dir: path.join(out.dir, 'ablations'), variants: variants.map(parseVariantSpec), hashes: true });
    const live = await ProjectionRunner.open({ log, readModel: path.join(out.dir, 'views.db'), projections: RUN_PROJECTIONS, runId: out.runId });
    // Answer selection is built on demand, as a report builds it.
    await live.catchUp();
    const liveHashes: Record<string, string> = {};
    for (const p of RUN_PROJECTIONS) liveHashes[p.name] = await live.stateHash(p.name);
    await live.close();
    return { result, liveHashes };
  } finally {
    await log.close();
  }
}

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-ablate-methods-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('ablation of each method judgement', () => {
  for (const [method, key] of [
    ['cure', 'rewards.std=none'],
    ['tcs', 'tcs.validityWeight=1,tcs.counterexampleWeight=0'],
    ['ace', 'ace.suspectLabel=desirable'],
  ] as const) {
    it(`${method}: the recorded settings rebuild the live read models; ${key} is answered`, async () => {
      const { result, liveHashes } = await ablateRun(method, ['same:', `v:${key}`]);
      const [same, v] = result.variants;
      expect(same?.status).toBe('answered');
      expect(v?.status).toBe('answered');
      if (same?.status !== 'answered') return;
      for (const [name, hash] of Object.entries(same.hashes!)) expect({ [name]: hash }).toEqual({ [name]: liveHashes[name] });
    }, 180_000);
  }

  it('refuses an EvolveCoder run with the reason', async () => {
    const err = await ablateRun('evolvecoder', ['same:']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AblationError);
    expect((err as Error).message).toMatch(/EvolveCoder run's judgement chooses the tests later rounds execute/);
  }, 180_000);
});
