/**
 * A whole run trained through a real gpu-bridge process (toy model, CPU), sampled from
 * StandInOpenAIServer (a stand-in for a model server): the bridge is SIGKILLed in the middle of
 * round 2's code step (after its first micro-batch, before the optimizer step) and the Learner
 * starts a new one, which loads the last published version of each policy it trains and applies
 * the same batch id once. In the log: one completed step per batch id, the kill as one recorded
 * retryable TrainingStepFailed of that batch, versions consecutive, replay --verify passing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig } from '../support/small-config.js';
import { StandInOpenAIServer } from '../support/stand-in-openai-server.js';
import { torchMissing } from '../support/bridge-serve.js';
import { runCli } from '../support/cli.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import { parseConfig } from '../../src/config/load.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

const missing = torchMissing();
let root: string;
let server: StandInOpenAIServer;
let outcome: RunOutcome;
let events: EventEnvelope[];
const killedPids: number[] = [];
const bridgePids = new Set<number>();

describe.skipIf(missing !== null)(`a bridge SIGKILLed mid-step inside a run${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bridge-sigkill-'));
    const problems = loadDemoProblems();
    server = await StandInOpenAIServer.start(({ prompt, n }) => {
      const p = problems.find((q) => prompt.includes(q.statement.trim()))!;
      return Array.from({ length: n }, (_, i) =>
        prompt.startsWith('Solve') ? `\`\`\`python\n${i % 2 ? p.solutions[0] : p.incorrectSolutions[i % 4]}\`\`\`` : 'assert f(1) == 1',
      );
    });
    const base = smallConfig(root);
    const openai = { baseUrl: server.baseUrl, model: 'toy-policy', maxTokens: 64, concurrency: 1, timeoutMs: 30_000, retry: { attempts: 2, baseDelayMs: 10 } };
    const config = parseConfig({
      ...base,
      name: 'sigkill',
      rounds: 3,
      dataset: { format: 'demo', limit: 1 },
      sampling: { problemsPerRound: 1, groupSize: 4, suitesPerProgram: 1, suiteSize: 2, whiteBox: false },
      policies: { code: { backend: 'openai', lr: 0.01, mutants: 0, openai }, test: { backend: 'openai', lr: 0.01, openai } },
      // One row per micro-batch: the step reports progress after each, before its optimizer step.
      learner: {
        bridge: {
          backend: 'toy',
          seed: 0,
          device: 'cpu',
          microBatchSize: 1,
          config: { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 1024 },
          retry: { attempts: 3, baseDelayMs: 10 },
        },
      },
    });
    const steps = new Set<string>();
    outcome = await runExperiment({
      config,
      dir: path.join(root, 'run'),
      cacheDir: catalogCache(),
      onBridgeEvent: (e, client) => {
        if (client.pid !== undefined) bridgePids.add(client.pid);
        if (e.event !== 'progress' || e.op !== 'train_step') return;
        steps.add(`${client.pid}/${e.id}`);
        // Steps on the first bridge: round 1 code, round 1 test, round 2 code (the third).
        if (killedPids.length === 0 && steps.size === 3 && client.pid !== undefined) {
          killedPids.push(client.pid);
          process.kill(client.pid, 'SIGKILL');
        }
      },
    });
    events = await recordedEvents(outcome.dir);
  }, 300_000);

  afterAll(async () => {
    await server?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const ofType = (t: string) => events.filter((e) => e.type === t).map((e) => e.data as Record<string, unknown>);

  it('the bridge was killed once, mid-step, and a new one finished the run', () => {
    expect(killedPids).toHaveLength(1);
    expect(bridgePids.size).toBe(2);
    expect(outcome.finished).toBe(true);
  });

  it("the kill is one retryable failure of round 2's code batch, retried under the same batch id", () => {
    const failed = ofType('TrainingStepFailed') as { batchId: string; role: string; retryable: boolean; error: string }[];
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ batchId: `${outcome.runId}/round/2/code`, role: 'code', retryable: true });
    expect(failed[0]!.error).toMatch(/dead|killed|SIGKILL/i);
  });

  it('no step lost or doubled: one completed step per batch id, versions consecutive per role', () => {
    const formed = (ofType('TrainingBatchFormed') as { batchId: string }[]).map((b) => b.batchId);
    const steps = ofType('TrainingStepCompleted') as {
      batchId: string;
      role: string;
      fromVersion: number;
      toVersion: number;
      metrics: Record<string, number>;
    }[];
    const ids = steps.map((s) => s.batchId);
    expect(ids).toEqual(formed);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([1, 2, 3].flatMap((r) => ['code', 'test'].map((role) => `${outcome.runId}/round/${r}/${role}`)));
    for (const role of ['code', 'test']) {
      const mine = steps.filter((s) => s.role === role);
      expect(mine.map((s) => [s.fromVersion, s.toVersion])).toEqual([
        [0, 1],
        [1, 2],
        [2, 3],
      ]);
      // Applied once: the bridge that finished the step had not seen the batch before.
      for (const s of mine) expect(s.metrics.duplicate).toBe(0);
    }
    const published = (ofType('PolicyVersionPublished') as { policy: { role: string; version: number } }[]).map((p) => `${p.policy.role}:${p.policy.version}`);
    expect(published).toEqual([0, 1, 2, 3].flatMap((v) => [`code:${v}`, `test:${v}`]));
  });

  it('replay --verify rebuilds the same read models', async () => {
    const { code, out } = await runCli(['replay', outcome.dir, '--verify', '--json']);
    expect(code).toBe(0);
    expect((JSON.parse(out) as { verified: boolean }).verified).toBe(true);
  });
});
