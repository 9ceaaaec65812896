/**
 * A run trained through gpu-bridge and served by gpu-bridge `serve` (toy model, CPU) resumes on a
 * disk that lacks its checkpoint directories: the run stops once round 1's versions are
 * published, `<run>/checkpoints` is deleted (as on another machine with only the log), and the
 * resumed run's Learner and samplers put version 1 together from the log's blob store, train
 * round 2 from it and publish version 2.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { servedRunConfig } from '../support/small-config.js';
import { startBridgeServe, torchMissing, type BridgeServe } from '../support/bridge-serve.js';
import { runExperiment } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventData } from '../../src/events/catalog.js';
import { recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

const missing = torchMissing();
const TOKEN_ENV = 'CRUCIBLE_TEST_CKPT_ADMIN_TOKEN';
const token = 'checkpoint-resume-admin-token';
const servers: BridgeServe[] = [];
let root: string | undefined;

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  delete process.env[TOKEN_ENV];
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.skipIf(missing !== null)(`checkpoints read back from the log's blob store${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  it('a run resumed without its checkpoint directories loads version 1 from the blob store and trains on to version 2', async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-ckpt-resume-'));
    process.env[TOKEN_ENV] = token;
    const [code, test] = await Promise.all([startBridgeServe({ seed: 5, adminToken: token }), startBridgeServe({ seed: 6, adminToken: token })]);
    servers.push(code!, test!);
    const config = servedRunConfig(root, { code: code!, test: test! }, { tokenEnv: TOKEN_ENV, maxTokens: 16 });
    const dir = path.join(root, 'run');

    // Stop once both roles' version 1 is in the log (round 1 trained, round 2 not yet sampled).
    let reader = null as Awaited<ReturnType<typeof openSqliteLog>> | null;
    let published = false;
    const stopped = await runExperiment({
      config,
      dir,
      cacheDir: catalogCache(),
      onStep: async () => {
        reader ??= await openSqliteLog(path.join(dir, 'log.db'), { create: false });
        const v1 = new Set<string>();
        for await (const e of reader.read({}, { types: ['PolicyVersionPublished'] })) {
          const d = e.data as EventData<'PolicyVersionPublished'>;
          if (d.policy.version === 1) v1.add(d.policy.role);
        }
        published = v1.size === 2;
      },
      stopWhen: () => published,
    });
    await reader?.close();
    expect(stopped.finished).toBe(false);
    const before = await recordedEvents(dir);
    expect(before.filter((e) => e.type === 'ModelSampled').every((e) => (e.data as { policy: { version: number } }).policy.version === 0)).toBe(true);

    // Another disk: the log is all there is.
    rmSync(path.join(dir, 'checkpoints'), { recursive: true, force: true });
    const done = await runExperiment({ config, dir, cacheDir: catalogCache() });
    expect(done.finished).toBe(true);
    const events = await recordedEvents(dir);
    const of = <T extends 'TrainingStepCompleted' | 'TrainingStepFailed' | 'PolicyVersionPublished' | 'ModelSampled'>(t: T) =>
      events.filter((e) => e.type === t).map((e) => e.data as EventData<T>);
    expect(of('TrainingStepFailed')).toEqual([]);
    expect(of('TrainingStepCompleted').map((s) => `${s.role}:${s.fromVersion}->${s.toVersion}`)).toEqual(['code:0->1', 'test:0->1', 'code:1->2', 'test:1->2']);
    // Round 2 sampled version 1, served from the copy put together from the blob store.
    const round2 = of('ModelSampled').filter((s) => s.policy.version === 1);
    expect(round2.length).toBeGreaterThan(0);
    for (const s of round2) expect(s.served.fingerprint).toBe('v1');
    const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
    try {
      for (const p of of('PolicyVersionPublished')) {
        const params = JSON.parse(await log.blobs.getText(p.checkpoint!)) as { checkpoint: { path: string; sha256: string; files: Record<string, unknown> } };
        expect(Object.keys(params.checkpoint.files)).toContain('model.pt');
        const copy = path.join(dir, 'checkpoint-cache', params.checkpoint.sha256);
        if (p.policy.version === 1) expect(readFileSync(path.join(copy, 'STABLE'), 'utf8').trim()).toBe(params.checkpoint.sha256);
        // Version 2 was published by the resumed trainer on this disk.
        if (p.policy.version === 2) expect(existsSync(params.checkpoint.path)).toBe(true);
      }
    } finally {
      await log.close();
    }
  }, 600_000);
});
