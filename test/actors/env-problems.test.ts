/**
 * A process reads a run's problems and its catalog from the blobs its RunStarted names (a real
 * SQLite log's blob store), not from a local dataset or cache: the record comes back as written;
 * a problem the run does not name, a blob that is not a problem record (or not a catalog), or one
 * holding another problem are refused with an error naming the problem and the blob.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunEnv, type PolicyBackend } from '../../src/actors/env.js';
import { Problem } from '../../src/core/problem.js';
import { asPosition, type EventLog } from '../../src/events/log.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { smallConfig } from '../support/small-config.js';
import type { Sandbox } from '../../src/sandbox/api.js';
import { createSandbox } from '../../src/sandbox/index.js';
import { prepareRun } from '../../src/actors/sources.js';
import { sandboxOptions } from '../../src/actors/run.js';
import { canonicalJson } from '../../src/core/canonical-json.js';

let root: string;
let log: EventLog;

const problem = (id: string) =>
  Problem.parse({
    id,
    source: 'test',
    statement: `Print the sum of two integers (${id}).`,
    style: 'stdio',
    tests: { public: [{ style: 'stdio', input: '1 2\n', output: '3\n' }], private: [], generated: [] },
    solutions: ['a, b = map(int, input().split())\nprint(a + b)\n'],
    incorrectSolutions: [],
    limits: { timeSeconds: 1, memoryMb: 64 },
  });

function runStarted(runId: string, refs: { problemId: string; problemHash: string }[]): EventEnvelope {
  return {
    id: 'e1',
    type: 'RunStarted',
    v: 1,
    runId,
    stream: 'conductor',
    position: asPosition(1),
    commitId: `${runId}/run-started`,
    causationId: null,
    correlationId: null,
    at: '2026-01-01T00:00:00Z',
    data: { method: 'code-a1', config: {}, configHash: 'a'.repeat(64), seed: 1, crucibleVersion: '0.1.0', problems: refs },
  };
}

/** Neither is used by env.problem: the problems come from the blob store alone. */
const env = () =>
  new RunEnv({ runId: 'r', config: smallConfig(root), blobs: log.blobs, sandbox: null as unknown as Sandbox, backend: null as unknown as PolicyBackend });

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-env-'));
  log = await openSqliteLog(path.join(root, 'log.db'));
});

afterAll(async () => {
  await log.close();
  rmSync(root, { recursive: true, force: true });
});

describe('RunEnv.problem', () => {
  it('reads each problem from the blob RunStarted names', async () => {
    const a = problem('p/a');
    const b = problem('p/b');
    const e = env();
    e.view.observe(
      runStarted('r', [
        { problemId: a.id, problemHash: await log.blobs.put(RunEnv.problemBlob(a)) },
        { problemId: b.id, problemHash: await log.blobs.put(RunEnv.problemBlob(b)) },
      ]),
    );
    expect(await e.problem('p/b')).toEqual(b);
    expect(await e.problem('p/a')).toEqual(a);
    // Another run's RunStarted in the same log names nothing for this one.
    const other = env();
    other.view.observe(runStarted('another-run', [{ problemId: a.id, problemHash: await log.blobs.put(RunEnv.problemBlob(a)) }]));
    await expect(other.problem('p/a')).rejects.toThrow(/problem p\/a is not among the problems recorded in the RunStarted of run r/);
  });

  it('refuses a blob that is not a problem record, or holds another problem', async () => {
    const e = env();
    const notJson = await log.blobs.put('not json at all');
    const notProblem = await log.blobs.put(JSON.stringify({ id: 'p/x', statement: 3 }));
    const otherProblem = await log.blobs.put(RunEnv.problemBlob(problem('p/y')));
    e.view.observe(
      runStarted('r', [
        { problemId: 'p/j', problemHash: notJson },
        { problemId: 'p/x', problemHash: notProblem },
        { problemId: 'p/z', problemHash: otherProblem },
      ]),
    );
    await expect(e.problem('p/j')).rejects.toThrow(new RegExp(`problem p/j: its recorded blob ${notJson.slice(0, 12)} is not JSON`));
    await expect(e.problem('p/x')).rejects.toThrow(/problem p\/x: its recorded blob \w+ is not a problem record \(.*statement/);
    await expect(e.problem('p/z')).rejects.toThrow(/problem p\/z: its recorded blob \w+ holds problem p\/y/);
    await expect(e.problem('p/none')).rejects.toThrow(/not among the problems recorded/);
  });
});

describe('the catalog a run records', () => {
  it('is stored by hash when built, and read back by that hash without building (no sandbox run)', async () => {
    const config = smallConfig(root, { dataset: { format: 'demo', limit: 2 } });
    const sandbox = await createSandbox(sandboxOptions(config));
    let built;
    try {
      built = await prepareRun(config, null, sandbox, root, { blobs: log.blobs, hash: null });
    } finally {
      await sandbox.close();
    }
    expect(built.catalogHash).toMatch(/^[0-9a-f]{64}$/);
    // A sandbox that refuses every run: reading the recorded catalog must not need one.
    const refusing: Sandbox = {
      isolation: 'rlimits',
      run: async () => {
        throw new Error('no sandbox here');
      },
      close: async () => {},
    };
    const read = await prepareRun(config, null, refusing, root, { blobs: log.blobs, hash: built.catalogHash });
    expect(read.catalogHash).toBe(built.catalogHash);
    expect(read.problems).toEqual(built.problems);
    const params = { code: read.backend.initialParams('code'), test: read.backend.initialParams('test') };
    expect(
      read.backend.evaluate(
        params,
        read.problems.map((p) => p.id),
        false,
      ),
    ).toEqual(
      built.backend.evaluate(
        params,
        built.problems.map((p) => p.id),
        false,
      ),
    );
  }, 120_000);

  it('refuses a recorded catalog that is not one, or lacks a problem of the run', async () => {
    const config = smallConfig(root, { dataset: { format: 'demo', limit: 2 } });
    const refusing: Sandbox = {
      isolation: 'rlimits',
      run: async () => {
        throw new Error('no sandbox here');
      },
      close: async () => {},
    };
    const notCatalog = await log.blobs.put(JSON.stringify({ programs: 3 }));
    await expect(prepareRun(config, null, refusing, root, { blobs: log.blobs, hash: notCatalog })).rejects.toThrow(
      new RegExp(`the catalog recorded in RunStarted \\(blob ${notCatalog.slice(0, 12)}\\) is not a catalog \\(programs`),
    );
    const empty = await log.blobs.put(canonicalJson({ programs: {}, tests: {}, validTests: {} }));
    await expect(prepareRun(config, null, refusing, root, { blobs: log.blobs, hash: empty })).rejects.toThrow(/has no candidates for problem demo\//);
  });
});
