/**
 * `crucible run CONFIG --log nats://... --workers SPEC --seeds N` as a user runs it (the real
 * command in a child process, a real nats-server): each seed's run as worker processes, one
 * after another, summarized as the in-process runs of the same seeds are.
 */
import { smallDemoArgs } from '../support/small-config.js';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProcess } from '../support/cli.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import type { SummaryRow } from '../../src/cli/seed-summary.js';
import { startTestNats, type TestNats } from '../support/nats.js';

let dir: string;
let nats: TestNats;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-worker-seeds-'));
  nats = await startTestNats(1);
}, 60_000);
afterAll(async () => {
  await nats?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const crucible = runProcess;

/** A small demo. The in-process runs go to a directory of their own: in the workers' one, a run
 * of the same config would resume the run on the server instead of running in-process. */
const small = (sub: string) => [...smallDemoArgs(path.join(dir, sub), 1)];

describe('run --workers --seeds', () => {
  it('runs each seed as worker processes and prints the summary of the in-process runs of those seeds', async () => {
    const out = await crucible(['run', 'configs/demo.yaml', ...small('workers'), '--log', nats.urls[0]!, '--workers', 'executor=2', '--seeds', '2', '--json']);
    // Warnings and the progress lines of a run whose output is not a terminal, nothing else.
    expect(out.stderr).not.toMatch(/crucible: (?!warning|round \d+\/\d+ (done|under way)|resuming run )/);
    expect(out.code).toBe(0);
    const summary = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as SummaryRow & { runIds: string[] });
    expect(summary.map((r) => r.round)).toEqual([1]);
    const bySeed: (RoundRow & { runId: string })[] = [];
    for (const seed of [7, 8]) {
      const one = await crucible(['run', 'configs/demo.yaml', ...small('in-process'), '--seed', String(seed), '--json']);
      expect(one.code).toBe(0);
      bySeed.push(JSON.parse(one.stdout.trim()) as RoundRow & { runId: string });
    }
    // One run per seed (the run directory is part of the config, so the ids differ from the
    // in-process runs' by their config hash), summarized to the in-process runs' figures.
    expect(summary[0]!.runIds).toHaveLength(2);
    expect(summary[0]!.runIds[0]).toMatch(/^demo-s7-/);
    expect(summary[0]!.runIds[1]).toMatch(/^demo-s8-/);
    expect(summary[0]!.seeds).toBe(2);
    for (const column of ['heldOutPass', 'exactCorrect'] as const) {
      const [a, b] = bySeed.map((r) => r[column]!);
      expect(summary[0]!.columns[column]!.mean, column).toBeCloseTo((a! + b!) / 2, 12);
      expect(summary[0]!.columns[column]!.min, column).toBe(Math.min(a!, b!));
      expect(summary[0]!.columns[column]!.max, column).toBe(Math.max(a!, b!));
    }
  }, 400_000);
});
