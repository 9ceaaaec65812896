/**
 * A `crucible run` process SIGKILLed while an effect is under way (the Executor inside a sandbox
 * call, the Judge between its inputs and its output) and started again writes the same tables as
 * an uninterrupted run, and never executes a (program, test) pair twice.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { catalog } from '../../src/events/catalog.js';
import { dataText } from '../../src/events/sqlite/stored-data.js';
import { allPairResults } from '../../src/projections/recorded-verdicts.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(REPO, 'bin/crucible.js');
let root: string;

const CONFIG = (dir: string) => `
name: sigkill
method: code-a1
seed: 5
rounds: 3
dir: ${JSON.stringify(dir)}
dataset: { format: demo, limit: 3 }
sampling: { problemsPerRound: 3, groupSize: 6, suitesPerProgram: 2, suiteSize: 4, whiteBox: false }
policies: { code: { lr: 1.0, mutants: 4 }, test: { lr: 1.0, candidates: 24 } }
selection: { testSamples: all }
`;

interface Row {
  round: number;
  [k: string]: unknown;
}

function rowsOf(stdout: string): Row[] {
  return stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const { seconds: _s, runId: _r, ...row } = JSON.parse(l) as Row & { seconds: number; runId: string };
      return row as Row;
    });
}

function runToEnd(config: string, dir: string): Row[] {
  const r = spawnSync(process.execPath, [CLI, 'run', config, '--dir', dir, '--json'], { cwd: REPO, encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`crucible run exited ${r.status}: ${r.stderr}`);
  return rowsOf(r.stdout);
}

type Ev = { type: string; data: Record<string, unknown> };

/** What the log says is under way, read by another process as the run writes it. */
class LogWatcher {
  #db: Database.Database | null = null;
  #after = 0;
  readonly events: Ev[] = [];
  constructor(readonly file: string) {}
  poll(): void {
    if (!this.#db) {
      if (!existsSync(this.file)) return;
      try {
        this.#db = new Database(this.file, { readonly: true, fileMustExist: true });
      } catch {
        return;
      }
    }
    try {
      const rows = this.#db.prepare('SELECT position, type, data FROM events WHERE position > ? ORDER BY position').all(this.#after) as {
        position: number;
        type: string;
        data: string | Buffer;
      }[];
      for (const r of rows) {
        this.events.push({ type: r.type, data: catalog.fromStored(r.type, JSON.parse(dataText(r.data)), {}) as Record<string, unknown> });
        this.#after = r.position;
      }
    } catch {
      // The schema may not be there yet on the first polls.
    }
  }
  close(): void {
    this.#db?.close();
  }
  /** Request ids with pairs to execute and no verdict yet: the Executor is inside a sandbox call. */
  executing(): string[] {
    const done = new Set(this.events.filter((e) => e.type === 'ProgramExecuted').map((e) => e.data.requestId as string));
    return this.events
      .filter((e) => e.type === 'ExecutionRequested' && (e.data.pairs as unknown[]).length > 0 && !done.has(e.data.requestId as string))
      .map((e) => e.data.requestId as string);
  }
  /** Problem-rounds whose verdicts are all in and whose judgement is not: the Judge is at work. */
  judging(): string[] {
    const done = new Set(this.events.filter((e) => e.type === 'ProgramExecuted').map((e) => e.data.requestId as string));
    const complete = (e: Ev) => (e.data.pairs as unknown[]).length === 0 || done.has(e.data.requestId as string);
    const byRound = new Map<string, Ev[]>();
    for (const e of this.events) {
      if (e.type !== 'ExecutionRequested') continue;
      const k = `${e.data.round as number}/${e.data.problemId as string}`;
      byRound.set(k, [...(byRound.get(k) ?? []), e]);
    }
    const evaluated = new Set(this.events.filter((e) => e.type === 'ProblemEvaluated').map((e) => `${e.data.round as number}/${e.data.problemId as string}`));
    const judged = new Set(this.events.filter((e) => e.type === 'TestsJudged').map((e) => `${e.data.round as number}/${e.data.problemId as string}`));
    const out: string[] = [];
    for (const [k, reqs] of byRound) {
      if (evaluated.has(k) || !reqs.every(complete)) continue;
      // Oracle in and not yet planned, or every request in and not yet judged.
      if ((reqs.length === 1 && !judged.has(k)) || (reqs.length === 4 && judged.has(k))) out.push(k);
    }
    return out;
  }
}

/** Starts `crucible run` and SIGKILLs it the moment `when` names work under way; resolves with
 * that work, or null when the run finished first. */
function killWhen(config: string, dir: string, when: (w: LogWatcher) => string[]): Promise<{ caught: string[]; watcher: LogWatcher } | null> {
  const watcher = new LogWatcher(path.join(dir, 'log.db'));
  // Snapshots often, so that restarts begin from them as well as from the start of the log.
  const child: ChildProcess = spawn(process.execPath, [CLI, 'run', config, '--dir', dir, '--json', '--snapshot-every', '50'], {
    cwd: REPO,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setInterval(() => {
      watcher.poll();
      const caught = when(watcher);
      if (caught.length > 0 && !settled) {
        settled = true;
        child.kill('SIGKILL');
        clearInterval(timer);
        child.once('exit', () => resolve({ caught, watcher }));
      }
    }, 2);
    child.once('exit', (code) => {
      if (settled) return;
      settled = true;
      clearInterval(timer);
      watcher.close();
      if (code === 0) resolve(null);
      else reject(new Error(`crucible run exited ${code} before it was killed`));
    });
  });
}

let config: string;
let baseline: Row[];

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-sigkill-'));
  config = path.join(root, 'sigkill.yaml');
  writeFileSync(config, CONFIG(root));
  baseline = runToEnd(config, path.join(root, 'baseline'));
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a run process killed with SIGKILL mid-effect', () => {
  for (const [name, when] of [
    ['the Executor inside a sandbox call', (w: LogWatcher) => w.executing()],
    ['the Judge between its inputs and its output', (w: LogWatcher) => w.judging()],
  ] as const) {
    it(`resumes to the same tables after killing ${name}`, async () => {
      const dir = path.join(root, name.split(' ')[1]!.toLowerCase());
      let kills = 0;
      // Each kill lands while the named work is recorded as asked for and not yet answered; the
      // process is started again until the run ends.
      for (let attempt = 0; attempt < 6; attempt++) {
        const k = await killWhen(config, dir, when);
        if (!k) break;
        k.watcher.poll();
        // Nothing of the interrupted work reached the log after the kill.
        expect(when(k.watcher), 'the killed work was still unanswered').toEqual(expect.arrayContaining(k.caught));
        k.watcher.close();
        kills++;
        if (kills >= 2) break;
      }
      expect(kills, `${name} was caught at least once`).toBeGreaterThan(0);
      expect(runToEnd(config, dir)).toEqual(baseline);

      // Every (program, test) pair was executed at most once across the kills and restarts.
      const db = new Database(path.join(dir, 'log.db'), { readonly: true });
      const rows = db.prepare(`SELECT type, data FROM events WHERE type IN ('ExecutionRequested', 'ProgramExecuted') ORDER BY position`).all() as {
        type: string;
        data: string | Buffer;
      }[];
      db.close();
      const executed = new Map<string, number>();
      for (const r of allPairResults(
        rows.map((row) => ({ type: row.type, data: catalog.fromStored(row.type, JSON.parse(dataText(row.data)), {}) }) as EventEnvelope),
      )) {
        if (r.cached || r.verdict === 'sandbox_error') continue;
        const pair = `${r.programHash}:${r.testHash}`;
        executed.set(pair, (executed.get(pair) ?? 0) + 1);
      }
      const runs = [...executed].filter(([, n]) => n > 1);
      expect(runs).toEqual([]);
    }, 600_000);
  }
});
