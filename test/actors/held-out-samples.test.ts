/**
 * sampling.heldOutSamples: programs drawn for the held-out evaluation only. The held-out pass is
 * measured over more programs while training, attacks and rewards see the same G programs as a
 * run without them (real SQLite log, real sandbox, real python).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoProblemConfig } from '../support/small-config.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';
import { runCli } from '../support/cli.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { requestPairs, reusedPairs, type ExecutionPair } from '../../src/events/catalog.js';
import { pairResultsOf } from '../../src/events/program-executed.js';

const EXTRA = 5;
const G = 6;
let root: string;
let plain: RunOutcome;
let widened: RunOutcome;
let events: EventEnvelope[];

const config = (dir: string, heldOutSamples?: number) =>
  twoProblemConfig(dir, {
    rounds: 2,
    sampling: { problemsPerRound: 2, groupSize: G, suitesPerProgram: 2, suiteSize: 4, whiteBox: false, ...(heldOutSamples ? { heldOutSamples } : {}) },
  });

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-heldout-'));
  plain = await runExperiment({ config: config(root), dir: path.join(root, 'plain'), cacheDir: catalogCache() });
  widened = await runExperiment({ config: config(root, EXTRA), dir: path.join(root, 'widened'), cacheDir: catalogCache() });
  events = await recordedEvents(widened.dir);
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('sampling.heldOutSamples', () => {
  it('samples that many programs per scheduled problem, in one event with their own ids', () => {
    const scheduled = events.filter((e) => e.type === 'ProblemScheduled').length;
    const sampled = events
      .filter((e) => e.type === 'HeldOutSampled')
      .map((e) => e.data as { round: number; problemId: string; programs: { programId: string }[] });
    expect(scheduled).toBe(4);
    expect(sampled).toHaveLength(scheduled);
    for (const s of sampled) {
      expect(s.programs.map((p) => p.programId)).toEqual(Array.from({ length: EXTRA }, (_, i) => `${s.round}/${s.problemId}/h${i}`));
    }
  });

  it('changes nothing a run trains on: every figure but held-out pass is that of the run without them', () => {
    expect(widened.finished).toBe(true);
    const rest = (rows: RunOutcome['rows']) => rows.map(({ seconds: _s, heldOutPass: _h, ...r }) => r);
    expect(rest(widened.rows)).toEqual(rest(plain.rows));
    const rewards = (dir: string) =>
      recordedEvents(dir).then((all) => all.filter((e) => e.type === 'RewardsAssigned' || e.type === 'TrainingStepCompleted').map((e) => e.data));
    return Promise.all([rewards(plain.dir), rewards(widened.dir)]).then(([a, b]) => {
      // Timings are measurements, and a batch id names its run (whose id hashes the config).
      const noTimes = (xs: unknown[]) => JSON.parse(JSON.stringify(xs, (k, v) => (k === 'timeMs' || k === 'seconds' || k === 'batchId' ? undefined : v)));
      expect(noTimes(b)).toEqual(noTimes(a));
    });
  });

  it('measures held-out pass over G + heldOutSamples programs per problem, from their recorded verdicts', () => {
    // Every recorded verdict by (problem, program text, test): a held-out pair whose text was
    // drawn before is reused, not run again.
    const pairsOf = new Map<string, ExecutionPair[]>();
    const verdictOf = new Map<string, string>();
    const cell = (problemId: string, programHash: string, testHash: string) => `${problemId}\u0000${programHash}\u0000${testHash}`;
    // `<round>/<problemId>/<purpose>`, and problem ids hold slashes.
    const problemOf = (requestId: string) => requestId.slice(requestId.indexOf('/') + 1, requestId.lastIndexOf('/'));
    for (const e of events) {
      if (e.type === 'ExecutionRequested') pairsOf.set((e.data as { requestId: string }).requestId, requestPairs(e.data as never));
      for (const r of pairResultsOf(e, (id) => pairsOf.get(id))) verdictOf.set(cell(problemOf(r.requestId), r.programHash, r.testHash), r.verdict);
    }
    const heldOutRequests = events.filter((e) => e.type === 'ExecutionRequested' && (e.data as { requestId: string }).requestId.endsWith('/heldout'));
    const evaluated = events
      .filter((e) => e.type === 'ProblemEvaluated')
      .map((e) => e.data as { round: number; problemId: string; heldOut: { programs: number; passed: number } });
    expect(evaluated).toHaveLength(4);
    let programsSeen = 0;
    for (const d of evaluated) {
      const request = heldOutRequests.find((e) => (e.data as { requestId: string }).requestId === `${d.round}/${d.problemId}/heldout`)!;
      const all = [...requestPairs(request.data as never), ...reusedPairs(request.data as never)];
      const programs = new Map<string, string[]>();
      for (const pair of all)
        programs.set(pair.programId, [...(programs.get(pair.programId) ?? []), verdictOf.get(cell(d.problemId, pair.programHash, pair.testHash))!]);
      expect([...programs.keys()].sort()).toEqual(
        [
          ...Array.from({ length: G }, (_, i) => `${d.round}/${d.problemId}/s${i}`),
          ...Array.from({ length: EXTRA }, (_, i) => `${d.round}/${d.problemId}/h${i}`),
        ].sort(),
      );
      const passed = [...programs.values()].filter((vs) => vs.every((v) => v === 'accepted')).length;
      expect(d.heldOut).toEqual({ programs: G + EXTRA, passed });
      programsSeen += programs.size;
    }
    // The round table's held-out pass is over all of them.
    for (const row of widened.rows) {
      const mine = evaluated.filter((d) => d.round === row.round);
      expect(row.heldOutPass).toBeCloseTo(mine.reduce((a, d) => a + d.heldOut.passed, 0) / mine.reduce((a, d) => a + d.heldOut.programs, 0), 12);
    }
    expect(programsSeen).toBe(4 * (G + EXTRA));
  });

  it('replays to the same state, and an ablation variant re-judges with them', async () => {
    const verify = await runCli(['replay', widened.dir, '--verify']);
    expect(verify.code, verify.out).toBe(0);
    // Re-judged from the recorded verdicts with the run's own settings, held-out samples included.
    const ablate = await runCli(['ablate', widened.dir, '--variant', 'same:']);
    expect(ablate.code, ablate.out).toBe(0);
    expect(ablate.out).toContain("every figure of every variant equals the recorded run's");
  }, 120_000);
});
