import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteLog } from '../../src/events/sqlite-log.js';
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
