/**
 * The demo with its log on a 3-node JetStream cluster (R3 streams): one nats-server is killed
 * while the run is in its second round. The run completes with the table the same config gives on
 * SQLite, and the log holds every commit exactly once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment, runIdOf } from '../../src/actors/run.js';
import { openRunLog } from '../../src/events/open-log.js';
import { stopNode } from '../../src/nats-ops/nats-server.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { startTestNats, type TestNats } from '../support/nats.js';
import { catalogCache } from '../support/catalog-cache.js';

let root: string;
let nats: TestNats;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-run-cluster-'));
  nats = await startTestNats(3);
}, 60_000);
afterAll(async () => {
  await nats?.stop();
  rmSync(root, { recursive: true, force: true });
});

const config = () =>
  parseConfig({
    name: 'cluster',
    seed: 5,
    rounds: 3,
    dir: root,
    dataset: { format: 'demo', limit: 2 },
    sampling: { problemsPerRound: 2, groupSize: 4, suitesPerProgram: 2, suiteSize: 4, whiteBox: false },
    policies: { code: { lr: 1.0, mutants: 2 }, test: { lr: 1.0, candidates: 12 } },
  });
const figures = (rows: RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

describe('a run on a 3-node cluster', () => {
  it('survives a killed nats-server with the SQLite table, no commit lost or duplicated', async () => {
    const onSqlite = await runExperiment({ config: config(), dir: path.join(root, 'sqlite'), cacheDir: catalogCache() });
    const location = nats.urls.join(',');
    let killed = false;
    const onCluster = await runExperiment({
      config: config(),
      dir: path.join(root, 'cluster'),
      cacheDir: catalogCache(),
      log: location,
      onStep: async (_runtime, p) => {
        if (!killed && p.round >= 1) {
          killed = true;
          await stopNode(nats.cluster.nodes[1]!, 'SIGKILL');
        }
      },
    });
    expect(killed).toBe(true);
    expect(onCluster.finished).toBe(true);
    expect(figures(onCluster.rows)).toEqual(figures(onSqlite.rows));

    const log = await openRunLog(location, runIdOf(config()), { create: false });
    try {
      const commits = new Map<string, number>();
      const ids = new Set<string>();
      let events = 0;
      let last = -1;
      for await (const e of log.read()) {
        expect(e.position).toBeGreaterThan(last);
        last = e.position;
        events++;
        ids.add(e.id);
        commits.set(e.commitId, (commits.get(e.commitId) ?? 0) + 1);
      }
      expect(ids.size).toBe(events);
      // Each commit's events are stored once: as many as the same commit holds on SQLite.
      const sqlite = await openRunLog(path.join(root, 'sqlite', 'log.db'), '', { create: false });
      const expected = new Map<string, number>();
      for await (const e of sqlite.read()) expected.set(e.commitId, (expected.get(e.commitId) ?? 0) + 1);
      await sqlite.close();
      expect(commits).toEqual(expected);
    } finally {
      await log.close();
    }
  }, 300_000);
});
