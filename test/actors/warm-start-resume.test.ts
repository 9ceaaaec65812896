/**
 * A `crucible run` process SIGKILLed in the middle of its warm start (learner.sft, recorded three
 * steps at a time with the trainer's checkpoint) is resumed from its last recorded step: the
 * resumed process trains only the steps after it, each step is in the log once, and the warm
 * start ends at the checkpoint (by hash) an uninterrupted run ends at, every step with the same
 * loss. The uninterrupted run is `crucible run` too, records after every step, and says where
 * its warm start stands. Policies sample from a stand-in server; the trainer is a real gpu-bridge (toy
 * model, CPU). Each run's folder is its own, so neither finds the other's warm start in a cache.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig } from '../support/small-config.js';
import { StandInOpenAIServer } from '../support/stand-in-openai-server.js';
import { torchMissing } from '../support/bridge-serve.js';
import { runCli, runProcess } from '../support/cli.js';
import { recordedEvents } from '../support/run-log.js';
import { expectStatesMatchSchemas } from '../support/state-schemas.js';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const missing = torchMissing();
const STEPS = { code: 12, test: 4 };
let root: string;
let server: StandInOpenAIServer;
let configFile: string;
let uninterrupted: { events: EventEnvelope[]; stderr: string; code: number };
let atKill: EventEnvelope[];
let resumed: RunOutcome;
let resumedEvents: EventEnvelope[];
/** Training steps the resumed process asked its bridge for. */
const resumedSteps = new Set<string>();

/** Starts `crucible run` and SIGKILLs it once its log holds a warm-start checkpoint and no
 * published version yet (the warm start under way); rejects if it ends first. */
function killMidWarmStart(dir: string): Promise<void> {
  const child = spawn(process.execPath, [path.join(REPO, 'bin/crucible.js'), 'run', configFile, '--dir', dir, '--json'], {
    cwd: REPO,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const file = path.join(dir, 'log.db');
  let db: Database.Database | null = null;
  return new Promise((resolve, reject) => {
    let killed = false;
    const timer = setInterval(() => {
      try {
        db ??= existsSync(file) ? new Database(file, { readonly: true, fileMustExist: true }) : null;
        const types = db
          ? (db.prepare(`SELECT type FROM events WHERE type IN ('WarmStartCheckpointed', 'PolicyVersionPublished')`).all() as { type: string }[]).map(
              (r) => r.type,
            )
          : [];
        if (types.includes('WarmStartCheckpointed') && !types.includes('PolicyVersionPublished')) {
          killed = true;
          clearInterval(timer);
          child.kill('SIGKILL');
        }
      } catch {
        // The log's tables may not be there yet.
      }
    }, 2);
    child.once('exit', () => {
      clearInterval(timer);
      db?.close();
      if (killed) resolve();
      else reject(new Error(`crucible run ended before its warm start was caught under way: ${stderr.slice(-2000)}`));
    });
  });
}

describe.skipIf(missing !== null)(`a run killed mid-warm-start${missing ? ` [skipped: ${missing}]` : ''}`, () => {
  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-warm-resume-'));
    const problems = loadDemoProblems();
    // Answers to the brief prompts (short rows for the toy model's context) of the one problem.
    const p = problems.find((q) => q.id === 'demo/digital-root')!;
    server = await StandInOpenAIServer.start(({ prompt, n }) =>
      Array.from({ length: n }, (_, i) => (prompt.startsWith('Tests') ? 'assert f(1) == 1' : `\`\`\`python\n${p.solutions[i % p.solutions.length]}\`\`\``)),
    );
    const openai = {
      baseUrl: server.baseUrl,
      model: 'toy-policy',
      prompts: 'brief',
      maxTokens: 64,
      concurrency: 1,
      timeoutMs: 30_000,
      retry: { attempts: 2, baseDelayMs: 10 },
    };
    const configOf = (record: Record<string, number>) =>
      parseConfig({
        ...smallConfig(root),
        name: 'warm-resume',
        rounds: 1,
        // A problem whose programs are short: its rows fit the toy model's context.
        dataset: { format: 'demo', ids: ['demo/digital-root'] },
        sampling: { problemsPerRound: 1, groupSize: 2, suitesPerProgram: 1, suiteSize: 2, whiteBox: false },
        policies: { code: { backend: 'openai', lr: 0.001, mutants: 0, openai }, test: { backend: 'openai', lr: 0.001, openai } },
        learner: {
          bridge: { backend: 'toy', seed: 0, device: 'cpu', threads: 1, config: { d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_seq_len: 512 } },
          sft: { steps: STEPS, batchSize: 4, lr: 0.003, record },
        },
      });
    // The run to kill records three steps at a time; the uninterrupted one records after every
    // step (a chunk ends once a millisecond has passed: a step takes longer), so the two agree
    // however the steps were cut into chunks.
    const config = configOf({ steps: 3 });
    configFile = path.join(root, 'warm-resume.yaml');
    writeFileSync(configFile, stringify(config));
    const uninterruptedFile = path.join(root, 'warm-uninterrupted.yaml');
    writeFileSync(uninterruptedFile, stringify(configOf({ steps: 100, seconds: 0.001 })));
    // Each run directory in a folder of its own: the warm-start cache is the folder's.
    for (const d of ['a', 'b']) mkdirSync(path.join(root, d));

    const a = await runProcess(['run', uninterruptedFile, '--dir', path.join(root, 'a', 'run'), '--json']);
    uninterrupted = {
      events: existsSync(path.join(root, 'a', 'run', 'log.db')) ? await recordedEvents(path.join(root, 'a', 'run')) : [],
      stderr: a.stderr,
      code: a.code,
    };

    const dir = path.join(root, 'b', 'run');
    await killMidWarmStart(dir);
    atKill = await recordedEvents(dir);
    resumed = await runExperiment({
      config,
      dir,
      cacheDir: path.join(root, '.cache'),
      onBridgeEvent: (e, client) => {
        if (e.event === 'progress' && e.op === 'train_step') resumedSteps.add(`${client.pid}/${e.id}`);
      },
      // The Learner's state mid-warm-start is what its snapshots' schema accepts.
      onStep: (runtime) => expectStatesMatchSchemas(runtime as never),
    });
    resumedEvents = await recordedEvents(dir);
  }, 240_000);

  afterAll(async () => {
    await server?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const ofType = (events: EventEnvelope[], t: string) => events.filter((e) => e.type === t).map((e) => e.data as Record<string, any>);
  const warmSteps = (events: EventEnvelope[]) => ofType(events, 'TrainingStepCompleted').filter((s) => s.round === 0);

  it('the uninterrupted run records its warm start after every step (learner.sft.record.seconds) and says where it stands', () => {
    expect(uninterrupted.code, uninterrupted.stderr).toBe(0);
    const recorded = ofType(uninterrupted.events, 'WarmStartCheckpointed');
    expect(recorded.map((c) => `${c.role}:${c.step}`)).toEqual([
      ...Array.from({ length: STEPS.code }, (_, i) => `code:${i + 1}`),
      ...Array.from({ length: STEPS.test }, (_, i) => `test:${i + 1}`),
    ]);
    // Without a terminal: a line as each role's warm start ends, with the last step's loss.
    const lines = uninterrupted.stderr.split('\n').filter((l) => l.startsWith('crucible: warm start'));
    expect(lines.map((l) => l.replace(/loss \d+\.\d{3}/, 'loss L').replace(/position \d+/, 'position P'))).toEqual([
      'crucible: warm start code step 12/12, loss L: log position P',
      'crucible: warm start test step 4/4, loss L: log position P',
    ]);
  });

  it('was killed with part of its warm start recorded, three steps at a time, and nothing published', () => {
    const recorded = ofType(atKill, 'WarmStartCheckpointed');
    expect(recorded.length).toBeGreaterThan(0);
    expect(recorded.map((c) => `${c.role}:${c.step}`)).toEqual(['code:3', 'code:6', 'code:9', 'code:12', 'test:3'].slice(0, recorded.length));
    expect(ofType(atKill, 'PolicyVersionPublished')).toEqual([]);
    // Only whole chunks are in the log: each recorded step is followed by its chunk's checkpoint.
    const last = recorded.at(-1)!;
    expect(warmSteps(atKill).length).toBe(last.role === 'code' ? last.step : STEPS.code + last.step);
  });

  it('resumed from the last recorded step: the new process trained only the steps after it, and each step is in the log once', () => {
    expect(resumed.finished).toBe(true);
    // Its bridge's steps: the warm start's not recorded before the kill, then round 1's GRPO steps.
    const before = warmSteps(atKill).length;
    const round1 = ofType(resumedEvents, 'TrainingStepCompleted').filter((s) => s.round === 1);
    expect(round1.map((s) => s.role)).toEqual(['code', 'test']);
    expect(resumedSteps.size).toBe(STEPS.code + STEPS.test - before + round1.length);
    const steps = warmSteps(resumedEvents);
    expect(steps.map((s) => s.batchId)).toEqual([
      ...Array.from({ length: STEPS.code }, (_, i) => `${resumed.runId}/sft/${i + 1}/code`),
      ...Array.from({ length: STEPS.test }, (_, i) => `${resumed.runId}/sft/${i + 1}/test`),
    ]);
    expect(steps.map((s) => s.toVersion - s.fromVersion)).toEqual(steps.map(() => 1));
    // What was recorded before the kill stays as it was.
    expect(resumedEvents.slice(0, atKill.length).map((e) => e.id)).toEqual(atKill.map((e) => e.id));
  });

  it('ends at the checkpoint of the uninterrupted run, under the same warm-start key, every step with the same loss', async () => {
    const last = async (dir: string, events: EventEnvelope[]) => {
      const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false, readOnly: true });
      try {
        const out: string[] = [];
        for (const c of ofType(events, 'WarmStartCheckpointed').filter((r) => r.step === r.steps)) {
          out.push(
            `${c.role}:${c.step}:${c.key}:${(JSON.parse(await log.blobs.getText(c.checkpoint)) as { checkpoint: { sha256: string } }).checkpoint.sha256}`,
          );
        }
        return out;
      } finally {
        await log.close();
      }
    };
    const a = await last(path.join(root, 'a', 'run'), uninterrupted.events);
    expect(a).toHaveLength(2);
    expect(await last(resumed.dir, resumedEvents)).toEqual(a);
    const losses = (events: EventEnvelope[]) => warmSteps(events).map((s) => [s.role, s.metrics.loss, s.metrics.grad_norm]);
    expect(losses(resumedEvents)).toEqual(losses(uninterrupted.events));
  });

  it("replay --verify rebuilds the resumed run's read models", async () => {
    const { code, out } = await runCli(['replay', resumed.dir, '--verify', '--json']);
    expect(code).toBe(0);
    expect((JSON.parse(out) as { verified: boolean }).verified).toBe(true);
  });
});
