/** Reading a finished run's SQLite log in tests. */
import path from 'node:path';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openSqliteLog } from '../../src/events/sqlite-log.js';

/** Every event of the log in the run directory `dir`, in log order. */
export async function recordedEvents(dir: string): Promise<EventEnvelope[]> {
  const log = await openSqliteLog(path.join(dir, 'log.db'), { create: false });
  try {
    const out: EventEnvelope[] = [];
    for await (const e of log.read()) out.push(e);
    return out;
  } finally {
    await log.close();
  }
}
