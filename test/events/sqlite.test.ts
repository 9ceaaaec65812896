import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { describeEventLogConformance } from './conformance.js';
import { describeWorkQueueContract } from './work-queue-contract.js';

const fixture = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'crucible-log-'));
  const file = join(dir, 'events.db');
  return {
    // A small page size makes the paging paths run in every test.
    open: (opts?: Parameters<typeof openSqliteLog>[1]) => openSqliteLog(file, { ...opts, pageSize: 97, pollIntervalMs: 10 }),
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
};

describeEventLogConformance('sqlite', fixture);
describeWorkQueueContract('sqlite', fixture);

describe('sqlite appendCommits (several commits, one transaction)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'crucible-log-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const ev = (n: number) => ({ type: 'RoundStarted', runId: 'r', data: { round: n, problemIds: [] } });

  it('writes the commits in the order given, each as append would, and reports duplicates', async () => {
    const log = await openSqliteLog(join(dir, 'events.db'));
    await log.append('a', [ev(1)], { commitId: 'c1' });
    const results = await log.appendCommits([
      { stream: 'a', events: [ev(2), ev(3)], options: { commitId: 'c2' } },
      { stream: 'b', events: [ev(1)], options: { commitId: 'c1' } },
      { stream: 'b', events: [ev(4)], options: { commitId: 'c3' } },
    ]);
    expect(results.map((r) => [r.positions, r.duplicate])).toEqual([
      [[2, 3], false],
      [[1], true],
      [[4], false],
    ]);
    const stored = [];
    for await (const e of log.read()) stored.push([e.position, e.stream, e.commitId, (e.data as { round: number }).round]);
    expect(stored).toEqual([
      [1, 'a', 'c1', 1],
      [2, 'a', 'c2', 2],
      [3, 'a', 'c2', 3],
      [4, 'b', 'c3', 4],
    ]);
    await log.close();
  });

  it('writes none of them when one is bad, and names the bad event', async () => {
    const log = await openSqliteLog(join(dir, 'events.db'));
    await expect(
      log.appendCommits([
        { stream: 'a', events: [ev(1)], options: { commitId: 'ok' } },
        { stream: 'a', events: [{ type: 'RoundStarted', runId: 'r', data: { round: 'two', problemIds: [] } }], options: { commitId: 'bad' } },
      ]),
    ).rejects.toThrow(/RoundStarted[\s\S]*round/);
    await expect(
      log.appendCommits([
        { stream: 'a', events: [ev(1)], options: { commitId: 'ok' } },
        { stream: 'a', events: [ev(2)], options: { commitId: 'stale', expectedPosition: 7 as never } },
      ]),
    ).rejects.toThrow(/expected/i);
    expect(await log.head()).toBe(0);
    await log.close();
  });
});

describe('sqlite readPages', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'crucible-log-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('hands large events on a few at a time, every event once and in order', async () => {
    const log = await openSqliteLog(join(dir, 'events.db'), { pageSize: 1000 });
    // 40 events of about 6 KB of data each: one page of rows, several pages of decoded events.
    let seed = 7;
    const noise = () => Array.from({ length: 6000 }, () => String.fromCharCode(33 + ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % 90))).join('');
    const events = Array.from({ length: 40 }, (_, i) => ({ type: 'RunFailed', runId: 'r', data: { reason: `${i} ${noise()}` } }));
    await log.append('a', events, { commitId: 'big' });
    const pages: number[][] = [];
    for await (const page of log.readPages()) pages.push(page.map((e) => e.position));
    expect(pages.length).toBeGreaterThan(4);
    expect(Math.max(...pages.map((p) => p.length))).toBeLessThan(10);
    expect(pages.flat()).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const read = [];
    for await (const e of log.read()) read.push((e.data as { reason: string }).reason);
    expect(read).toEqual(events.map((e) => e.data.reason));
    await log.close();
  });
});
