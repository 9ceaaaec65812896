/**
 * One short run per method on the embedded default (real SQLite log, real sandbox, the catalog
 * policies), each checking the method's defining behaviour in its log, and at every step that
 * each actor's state matches the schemas its snapshots are checked against.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment } from '../../src/actors/run.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { requestPairs, requestSize, reusedPairs, type EventData, type EventType } from '../../src/events/catalog.js';
import { TestCase } from '../../src/core/problem.js';
import { exportEvolved } from '../../src/cli/commands/evolved.js';
import { allPairResults } from '../../src/projections/recorded-verdicts.js';
import { answerSelectionBothWays, recordedBlobs, recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';
import { expectStatesMatchSchemas } from '../support/state-schemas.js';

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

async function run(method: string, overrides: Record<string, unknown> = {}) {
  const cfg = config(method, overrides);
  // At every step, every actor's state matches the schemas its snapshots are checked against.
  const out = await runExperiment({
    config: cfg,
    dir: path.join(root, cfg.name),
    cacheDir: catalogCache(),
    onStep: (runtime) => expectStatesMatchSchemas(runtime as never),
  });
  expect(out.finished).toBe(true);
  const events = await recordedEvents(out.dir);
  // Every blob the tests need: the tests executed.
  const blobs = await recordedBlobs(
    out.dir,
    events.flatMap((e) => (e.type === 'ExecutionRequested' ? requestPairs(e.data as EventData<'ExecutionRequested'>).map((p) => p.testHash) : [])),
  );
  // Answer selection from the tallies the Judge recorded is the one counted from every verdict.
  const selection = await answerSelectionBothWays(out.dir);
  expect(selection.source).toBe('recorded');
  expect(selection.recorded).toBe(selection.fromVerdicts);
  expect(selection.scores.some((s) => (JSON.parse(s) as { heldOut: { run: number } }[]).some((c) => c.heldOut.run > 0))).toBe(true);
  const of = <T extends Parameters<typeof dataOfType>[1]>(type: T) => dataOfType(events, type);
  return { out, events, of, blob: (h: string) => blobs.get(h)! };
}

const SHARED = { policies: { shared: true, code: { lr: 1.0, mutants: 3 }, test: { lr: 1.0, candidates: 16 } } };

/** One policy for both roles: one name, one version stream, both roles sampling the same version. */
function expectOneVersionStream(of: Awaited<ReturnType<typeof run>>['of'], events: EventEnvelope[]) {
  const started = events.find((e) => e.type === 'RunStarted')!.data as EventData<'RunStarted'>;
  expect((started.config as { policies: { shared: boolean } }).policies.shared).toBe(true);
  const published = of('PolicyVersionPublished');
  expect(new Set(published.map((p) => p.policy.name))).toEqual(new Set(['catalog-shared']));
  const rounds = [...new Set(published.map((p) => p.round))];
  expect(rounds).toEqual([0, 1, 2]);
  for (const round of rounds) {
    const [code, test] = (['code', 'test'] as const).map((role) => published.find((p) => p.round === round && p.policy.role === role)!);
    // One checkpoint, one version: a step of each role per round, so round r publishes 2r.
    expect([code!.policy.version, test!.policy.version]).toEqual([2 * round, 2 * round]);
    expect(code!.checkpoint).toBe(test!.checkpoint);
  }
  const steps = of('TrainingStepCompleted').map((s) => [s.round, s.role, s.fromVersion, s.toVersion]);
  expect(steps).toEqual([
    [1, 'code', 0, 1],
    [1, 'test', 1, 2],
    [2, 'code', 2, 3],
    [2, 'test', 3, 4],
  ]);
  for (const s of of('ProblemScheduled')) expect(s.codeVersion).toBe(s.testVersion);
  const sampled = [
    ...of('SolutionSampled').map((s) => [s.round, s.policy.name, s.policy.version]),
    ...of('TestsSampled').map((s) => [s.round, s.policy.name, s.policy.version]),
  ];
  expect(new Set(sampled.map(String))).toEqual(new Set([`1,catalog-shared,0`, `2,catalog-shared,2`]));
}

function dataOfType<T extends EventType>(events: EventEnvelope[], type: T): EventData<T>[] {
  return events.filter((e) => e.type === type).map((e) => e.data as EventData<T>);
}

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-methods-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('each method runs on the same actors and log', () => {
  it('ace never runs a reference program nor a test with an expected value; SFT and KTO batches of one shared policy', async () => {
    const { of, blob, events } = await run('ace', SHARED);
    expectOneVersionStream(of, events);
    const requests = of('ExecutionRequested').filter((r) => r.purpose !== 'heldout');
    expect(requests.some((r) => r.purpose === 'oracle' && requestSize(r) > 0)).toBe(false);
    let pairs = 0;
    for (const r of requests) {
      for (const p of [...requestPairs(r), ...reusedPairs(r)]) {
        pairs++;
        // The Judge runs sampled programs only (the code policy may of course sample a correct one).
        if (r.purpose === 'reward') expect(p.programId).toMatch(/\/s\d+$/);
        const test = TestCase.parse(JSON.parse(blob(p.testHash) ?? '{}'));
        if (test.style === 'stdio') expect(test.output).toBeNull();
        if (test.style === 'call') expect('expected' in test).toBe(false);
      }
    }
    expect(pairs).toBeGreaterThan(0);
    const rewards = of('RewardsAssigned');
    expect(rewards.every((r) => r.rewardFn === 'ace/v1')).toBe(true);
    // Tests are labelled by crashes only: every trained suite is +1-ish or -1-ish, never graded by outputs.
    const test = rewards.filter((r) => r.role === 'test').flatMap((r) => r.items);
    expect(test.some((i) => i.components.desirable! + i.components.undesirable! > 0)).toBe(true);
    const code = rewards.filter((r) => r.role === 'code').flatMap((r) => r.items);
    expect(code.every((i) => i.reward === i.components.robust)).toBe(true);
    const algorithms = events.filter((e) => e.type === 'TrainingStepCompleted').map((e) => (e.data as EventData<'TrainingStepCompleted'>).role);
    expect(algorithms.length).toBe(4);
  }, 60_000);

  it('cure rewards equal the hand-computed values from the recorded verdicts; both roles sample one version stream', async () => {
    const { of, events } = await run('cure', SHARED);
    expectOneVersionStream(of, events);
    // Reused pairs carry no verdict of their own: look every pair up among the executed ones.
    const verdicts = new Map<string, string>();
    for (const d of allPairResults(events)) verdicts.set(`${d.programHash}|${d.testHash}`, d.verdict);
    const requests = of('ExecutionRequested').filter((r) => r.purpose === 'reward');
    for (const r of of('RewardsAssigned').filter((x) => x.role === 'code')) {
      const req = requests.find((q) => q.round === r.round && q.problemId === r.problemId)!;
      const all = [...requestPairs(req), ...reusedPairs(req)];
      for (const item of r.items) {
        const gt = all.filter((p) => p.programId === item.sampleId && p.testId.startsWith('gt/'));
        const passed = gt.filter((p) => verdicts.get(`${p.programHash}|${p.testHash}`) === 'accepted').length;
        expect(item.reward).toBeCloseTo(passed / gt.length, 12);
      }
      // z-normalized with the population std, or dropped (all advantages 0, none selected).
      const rs = r.items.map((i) => i.reward);
      const mean = rs.reduce((a, b) => a + b, 0) / rs.length;
      const std = Math.sqrt(rs.reduce((a, b) => a + (b - mean) ** 2, 0) / rs.length);
      r.items.forEach((i) => {
        if (std === 0) expect([i.advantage, i.components.selected]).toEqual([0, 0]);
        else expect(i.advantage).toBeCloseTo((i.reward - mean) / std, 12);
      });
    }
  }, 90_000);

  it('tcs decides a stage every round, switches by its rule, trains only the test policy from its rolling buffer', async () => {
    const { of } = await run('tcs', { rounds: 3, tcs: { switchRule: { kind: 'rounds', afterRounds: 1 }, bufferSize: 256, maxStaleness: 1 } });
    expect(of('StageDecided').map((s) => [s.round, s.stage, s.switched])).toEqual([
      [1, 1, false],
      [2, 2, true],
      [3, 2, false],
    ]);
    const tests = of('RewardsAssigned').filter((r) => r.role === 'test');
    expect(new Set(tests.map((r) => `${r.round},${r.rewardFn}`))).toEqual(new Set(['1,tcs/v2/stage1', '2,tcs/v2/stage2', '3,tcs/v2/stage2']));
    const testVersion = new Map(of('ProblemScheduled').map((s) => [`${s.round}/${s.problemId}`, s.testVersion]));
    const requests = of('ExecutionRequested').filter((r) => r.purpose === 'reward');
    let older = 0;
    for (const r of tests) {
      const current = testVersion.get(`${r.round}/${r.problemId}`)!;
      for (const i of r.items) {
        // Policy-aligned: every buffered sample was written by a version >= current - 1.
        expect(i.components.policyVersion!).toBeGreaterThanOrEqual(current - 1);
        expect(i.components.fromRound!).toBeLessThanOrEqual(r.round);
        if (i.components.fromRound! < r.round) {
          older++;
          // An earlier round's sample is judged against the current Solver: its tests ran on this round's programs.
          const req = requests.find((q) => q.round === r.round && q.problemId === r.problemId)!;
          if (i.components.failureModes! > 0)
            expect(
              [...requestPairs(req), ...reusedPairs(req)].some((p) => p.testId.startsWith(`${i.sampleId}/`) && p.programId.startsWith(`${r.round}/`)),
            ).toBe(true);
        }
        // Stage 2 trains exactly the samples at the Solver's current failure modes; stage 1 all.
        if (r.round >= 2) expect(i.components.selected).toBe(i.components.failureModes! > 0 ? 1 : 0);
        else expect(i.components.selected).toBe(1);
      }
    }
    expect(older).toBeGreaterThan(0);
    const batches = of('TrainingBatchFormed');
    expect(batches.filter((b) => b.role === 'code').every((b) => b.size === 0)).toBe(true);
    expect(batches.filter((b) => b.role === 'test').some((b) => b.size > 0)).toBe(true);
    // A later round's batch trains samples of an earlier round again (the Learner kept them).
    expect(batches.some((b) => b.role === 'test' && b.sampleIds.some((id) => Number(id.split('/')[0]) < b.round))).toBe(true);
  }, 90_000);

  it("tcs buffer: with maxStaleness 0 only the current policy's samples stay", async () => {
    const { of } = await run('tcs', { name: 'tcs-fresh', tcs: { switchRule: { kind: 'rounds', afterRounds: 1 }, maxStaleness: 0 } });
    const items = of('RewardsAssigned')
      .filter((r) => r.role === 'test')
      .flatMap((r) => r.items.map((i) => [r.round, i.components.fromRound]));
    expect(items.length).toBeGreaterThan(0);
    expect(items.every(([round, from]) => round === from)).toBe(true);
  }, 60_000);

  it('golden-tests rewards programs from dataset tests only and trains no test policy', async () => {
    const { of } = await run('golden-tests');
    const reward = of('ExecutionRequested').filter((r) => r.purpose === 'reward');
    expect(reward.flatMap((r) => [...requestPairs(r), ...reusedPairs(r)]).every((p) => p.testId.startsWith('gt/'))).toBe(true);
    expect(
      of('TrainingBatchFormed')
        .filter((b) => b.role === 'test')
        .every((b) => b.size === 0),
    ).toBe(true);
  }, 60_000);

  it('code-a1: program validity comes from the recorded load outcome (module body ran to the end), with no probe request', async () => {
    const { of } = await run('code-a1', { codeA1: { mistakeBookRule: 'release', codeGroupFilter: false } });
    expect(of('ExecutionRequested').some((r) => r.purpose === 'load')).toBe(false);
    const problemOf = new Map(of('ExecutionRequested').map((r) => [r.requestId, r.problemId]));
    // What the executions of each program in its problem told of its module body.
    const loads = new Map<string, string>();
    for (const d of of('ProgramExecuted')) {
      const k = `${problemOf.get(d.requestId)}|${d.programHash}`;
      if (d.load !== 'unknown' && (loads.get(k) ?? 'unknown') === 'unknown') loads.set(k, d.load);
    }
    const hashOf = new Map(of('SolutionSampled').map((s) => [s.solutionId, s.programHash]));
    const seen = new Set<number>();
    for (const r of of('RewardsAssigned').filter((x) => x.role === 'code')) {
      for (const i of r.items) {
        const load = loads.get(`${r.problemId}|${hashOf.get(i.sampleId)}`);
        // Call and assert problems: valid iff the module body ran to the end.
        expect(load, `${i.sampleId} has a recorded load outcome`).toBeDefined();
        expect(i.components.programValid).toBe(load === 'ran' ? 1 : 0);
        seen.add(i.components.programValid!);
      }
    }
    expect(seen.has(1)).toBe(true);
  }, 60_000);
});

describe('evolvecoder', () => {
  it('records one test per signature each round, applies the final filter, and a following run reads the evolved file', async () => {
    const { of, events, out } = await run('evolvecoder', {
      sampling: { problemsPerRound: 2, groupSize: 6, suitesPerProgram: 1, suiteSize: 8, whiteBox: false },
    });
    const verdicts = new Map<string, string>();
    for (const d of allPairResults(events)) verdicts.set(`${d.programHash}|${d.testHash}`, d.verdict);
    const evolved = of('TestsEvolved');
    expect(evolved.length).toBe(4);
    for (const r of evolved) {
      const signature = (h: string) => r.programs.map((p) => (verdicts.get(`${p.programHash}|${h}`) === 'accepted' ? '1' : '0')).join('');
      const sigs = r.reduced.map(signature);
      expect(new Set(sigs).size).toBe(sigs.length);
      expect(sigs.length).toBe(r.signatures);
      // The fixed candidates are the first round's.
      expect(r.programs.every((p) => p.programId.startsWith('1/'))).toBe(true);
    }
    const final = of('DatasetEvolved');
    expect(final.length).toBe(2);
    for (const d of final) {
      const r = evolved.find((x) => x.round === 2 && x.problemId === d.problemId)!;
      const counts = new Map<string, number>();
      for (const h of d.tests) {
        const s = r.programs.map((p) => (verdicts.get(`${p.programHash}|${h}`) === 'accepted' ? 1 : 0));
        expect(s.reduce((a: number, b) => a + b, 0) / s.length).toBeGreaterThanOrEqual(0.1);
        counts.set(s.join(''), (counts.get(s.join('')) ?? 0) + 1);
      }
      expect(Math.max(0, ...counts.values())).toBeLessThanOrEqual(5);
      expect(d.keepProblem).toBe(d.tests.length >= 5 && d.perfect <= 60);
    }
    const file = path.join(root, 'evolved.jsonl');
    const exported = await exportEvolved(out.dir, file);
    expect(exported.problems).toBe(final.filter((d) => d.keepProblem).length);
    // The demo problems keep enough tests: the following run has something to read.
    expect(exported.problems).toBeGreaterThan(0);
    {
      const rl = await run('golden-tests', { name: 'evolvecoder-rl', rounds: 1, dataset: { format: 'demo', path: file } });
      const gt = rl
        .of('ExecutionRequested')
        .filter((r) => r.purpose === 'reward')
        .flatMap((r) => [...requestPairs(r), ...reusedPairs(r)]);
      const evolvedHashes = new Set(final.flatMap((d) => d.tests));
      expect(gt.some((p) => evolvedHashes.has(p.testHash))).toBe(true);
    }
  }, 90_000);
});

describe('self-play', () => {
  it('one objective for both roles: each suite is rewarded with the R_code of the program it tests', async () => {
    const { of } = await run('self-play', { sampling: { problemsPerRound: 2, groupSize: 4, suitesPerProgram: 2, suiteSize: 4, whiteBox: true } });
    const rewards = of('RewardsAssigned');
    let checked = 0;
    for (const t of rewards.filter((r) => r.role === 'test')) {
      expect(t.rewardFn).toBe('self-play/v1');
      const code = rewards.find((r) => r.role === 'code' && r.round === t.round && r.problemId === t.problemId)!;
      for (const item of t.items) {
        // White-box suite ids are "<solutionId>/t<k>".
        const program = code.items.find((c) => item.sampleId.startsWith(`${c.sampleId}/`))!;
        expect(item.reward).toBe(program.reward);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
  }, 60_000);
});
