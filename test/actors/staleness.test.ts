/**
 * The Learner's off-policy bound (learner.maxStaleness) on a real run (SQLite log, sandbox,
 * catalog policies) whose policies move on while the round's samples wait to be trained: the run
 * is stopped once the round is rewarded, both policies are published at version 1 by hand (as
 * an asynchronous trainer would have done meanwhile), and the run resumes. The round's samples
 * were drawn at version 0, one version behind the step: k = 0 drops them, k = 1 trains them;
 * either way the batch records what it left out and replay --verify passes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig, twoProblemConfig } from '../support/small-config.js';
import { runExperiment, runIdOf } from '../../src/actors/run.js';
import { learnerPending, sampledTokens, tooStale } from '../../src/actors/learner.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { catalog, type EventData, type EventType } from '../../src/events/catalog.js';
import { runCli } from '../support/cli.js';
import { recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-stale-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = (maxStaleness: number) => twoProblemConfig(root, { name: `stale${maxStaleness}`, rounds: 1, learner: { maxStaleness } });

const eventsOf = recordedEvents;

/** Runs round 1 up to its training, publishes version 1 of both policies, then finishes. */
async function overlappedRun(maxStaleness: number) {
  const c = config(maxStaleness);
  const dir = path.join(root, `k${maxStaleness}`);
  // Stop once the log holds every reward of the round: the Learner folds them, and trains, only
  // in the next step.
  let reader = null as Awaited<ReturnType<typeof openSqliteLog>> | null;
  let rewarded = false;
  const stopped = await runExperiment({
    config: c,
    dir,
    cacheDir: catalogCache(),
    onStep: async () => {
      reader ??= await openSqliteLog(path.join(dir, 'log.db'), { create: false });
      let problems = 0;
      let rewards = 0;
      for await (const e of reader.read({}, { types: ['RoundStarted', 'RewardsAssigned'] })) {
        if (e.type === 'RoundStarted') problems += (e.data as EventData<'RoundStarted'>).problemIds.length;
        else rewards++;
      }
      rewarded = problems > 0 && rewards === 2 * problems;
    },
    stopWhen: () => rewarded,
  });
  await reader?.close();
  expect(stopped.finished).toBe(false);
  const before = await eventsOf(dir);
  expect(before.some((e) => e.type === 'TrainingBatchFormed')).toBe(false);
  // The policies move on while the round waits: version 1, with version 0's parameters (what
  // matters here is the versions in the log, not what the step changed).
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  const runId = runIdOf(c);
  const v0 = before.filter((e) => e.type === 'PolicyVersionPublished').map((e) => e.data as EventData<'PolicyVersionPublished'>);
  expect(v0.map((d) => d.policy.version)).toEqual([0, 0]);
  const v1 = [];
  for (const d of v0) {
    const state = JSON.parse(await log.blobs.getText(d.checkpoint!)) as { version: number };
    const checkpoint = await log.blobs.put(JSON.stringify({ ...state, version: 1 }));
    v1.push({ type: 'PolicyVersionPublished' as const, runId, data: { ...d, policy: { ...d.policy, version: 1 }, checkpoint, paramsHash: checkpoint } });
  }
  await log.append('learner', v1, { commitId: `${runId}/overlap` });
  await log.close();
  const done = await runExperiment({ config: c, dir, cacheDir: catalogCache() });
  expect(done.finished).toBe(true);
  const events = await eventsOf(dir);
  const of = <T extends EventType>(t: T) => events.filter((e) => e.type === t).map((e) => e.data as EventData<T>);
  return {
    dir,
    batches: of('TrainingBatchFormed'),
    rewarded: of('RewardsAssigned'),
    sampled: [...of('SolutionSampled').map((s) => s.policy.version), ...of('TestsSampled').map((s) => s.policy.version)],
  };
}

const replayVerify = (dir: string) => runCli(['replay', dir, '--verify', '--json']);

describe('learner.maxStaleness', () => {
  it('bounds by versions between the sample and the step', () => {
    expect(tooStale(0, 0, 0)).toBe(false);
    expect(tooStale(0, 1, 0)).toBe(true);
    expect(tooStale(0, 1, 1)).toBe(false);
    expect(tooStale(0, 2, 1)).toBe(true);
  });

  it('defaults to 0 (on-policy) and refuses a negative or fractional bound', () => {
    expect(smallConfig(root).learner.maxStaleness).toBe(0);
    expect(() => smallConfig(root, { learner: { maxStaleness: -1 } })).toThrow(/learner\.maxStaleness/);
    expect(() => smallConfig(root, { learner: { maxStaleness: 0.5 } })).toThrow(/learner\.maxStaleness/);
  });

  it('k = 0: samples one version behind are dropped, counted by id and version; replay --verify passes', async () => {
    const { dir, batches, rewarded, sampled } = await overlappedRun(0);
    expect(new Set(sampled)).toEqual(new Set([0]));
    const selected = rewarded.flatMap((r) => r.items.filter((i) => i.components.selected !== 0).map((i) => `${r.role}|${i.sampleId}`));
    expect(selected.length).toBeGreaterThan(0);
    expect(batches).toHaveLength(2);
    for (const b of batches) {
      expect(b.policy.version).toBe(1);
      expect(b.size).toBe(0);
      expect(b.sampleIds).toEqual([]);
      expect(b.staleness.maxStaleness).toBe(0);
      expect(b.staleness.dropped.every((d) => d.version === 0)).toBe(true);
    }
    // Every selected sample of the round is in exactly one batch's dropped list.
    expect(batches.flatMap((b) => b.staleness.dropped.map((d) => `${b.role}|${d.sampleId}`)).sort()).toEqual(selected.sort());
    const { code, out } = await replayVerify(dir);
    expect(code).toBe(0);
    expect((JSON.parse(out) as { verified: boolean }).verified).toBe(true);
  }, 300_000);

  it('k = 1: the same samples are trained, none dropped; replay --verify passes', async () => {
    const { dir, batches, rewarded } = await overlappedRun(1);
    const selected = rewarded.flatMap((r) => r.items.filter((i) => i.components.selected !== 0).map((i) => `${r.role}|${i.sampleId}`));
    expect(batches).toHaveLength(2);
    for (const b of batches) {
      expect(b.policy.version).toBe(1);
      expect(b.staleness).toEqual({ maxStaleness: 1, dropped: [] });
    }
    expect(batches.flatMap((b) => b.sampleIds.map((id) => `${b.role}|${id}`)).sort()).toEqual(selected.sort());
    expect(batches.reduce((n, b) => n + b.size, 0)).toBe(selected.length);
    const { code, out } = await replayVerify(dir);
    expect(code).toBe(0);
    expect((JSON.parse(out) as { verified: boolean }).verified).toBe(true);
  }, 300_000);

  it('a run that trains each round before the next drops nothing: the default (0) and 3 give the same tables', async () => {
    const run = async (k: number) => {
      const c = twoProblemConfig(root, { name: `sync${k}`, rounds: 2, learner: { maxStaleness: k } });
      const outcome = await runExperiment({ config: c, dir: path.join(root, `sync${k}`), cacheDir: catalogCache() });
      const batches = (await eventsOf(outcome.dir)).filter((e) => e.type === 'TrainingBatchFormed').map((e) => e.data as EventData<'TrainingBatchFormed'>);
      return { rows: outcome.rows.map(({ seconds: _s, ...r }) => r), batches };
    };
    const on = await run(0);
    const loose = await run(3);
    expect(on.batches).toHaveLength(4);
    for (const b of on.batches) expect(b.staleness).toEqual({ maxStaleness: 0, dropped: [] });
    expect(on.batches.some((b) => b.size > 0)).toBe(true);
    expect(on.rows).toEqual(loose.rows);
  }, 300_000);

  it("reads a sample's tokens blob as old log-probs only when both lists are there, one log-prob per token", () => {
    expect(sampledTokens(JSON.stringify({ tokenIds: [3, 4], tokenLogprobs: [-0.1, -2] }))).toEqual({ tokenIds: [3, 4], logprobs: [-0.1, -2] });
    expect(sampledTokens(JSON.stringify({ tokenIds: [3, 4], tokenLogprobs: null }))).toBeUndefined();
    expect(sampledTokens(JSON.stringify({ tokenIds: null, tokenLogprobs: [-0.1] }))).toBeUndefined();
    expect(sampledTokens(JSON.stringify({ tokenIds: [3, 4], tokenLogprobs: [-0.1] }))).toBeUndefined();
    expect(sampledTokens(JSON.stringify({ tokenIds: [], tokenLogprobs: [] }))).toBeUndefined();
    // A -inf log-prob is written as null by JSON; a positive one is no log-probability.
    expect(sampledTokens(JSON.stringify({ tokenIds: [3], tokenLogprobs: [-Infinity] }))).toBeUndefined();
    expect(sampledTokens(JSON.stringify({ tokenIds: [3], tokenLogprobs: [0.2] }))).toBeUndefined();
  });

  it('upcasts TrainingBatchFormed v1 (no bound) to v2: no bound, nothing dropped', () => {
    const v1 = {
      round: 1,
      batchId: 'b',
      role: 'code',
      policy: { role: 'code', name: 'catalog-code', version: 0 },
      batchHash: 'a'.repeat(64),
      size: 1,
      sampleIds: ['s'],
      control: 'none',
      advantageFrom: null,
    };
    const { v, data } = catalog.decode('TrainingBatchFormed', 1, v1, { position: 3 });
    expect(v).toBe(2);
    expect((data as EventData<'TrainingBatchFormed'>).staleness).toEqual({ maxStaleness: null, dropped: [] });
  });
});
