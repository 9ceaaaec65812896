import type { ResultFigures } from '../../src/events/program-executed.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { openMemoryLog } from '../../src/events/memory/memory-log.js';
import { readAtOf } from '../../src/events/read-at.js';

/** A log whose events an index under test folds and reads back: each event is appended as its
 * own commit (checked against its schema, as every event of a run is) and handed back as a fold
 * sees it, with its position. */
export function foldingLog() {
  const log = openMemoryLog();
  let commits = 0;
  return {
    log,
    read: readAtOf(log),
    async event(type: string, data: unknown): Promise<EventEnvelope> {
      const { positions } = await log.append('test', [{ type, runId: 'run', data } as never], { commitId: `c${++commits}` });
      const [e] = await log.readAt(positions);
      return e!;
    },
  };
}

/** A hash for tests: `n` in 64 hex digits. */
export const h = (n: number) => n.toString(16).padStart(64, '0');

/** A result's figures as a sandbox reports them, with the verdict and time given. */
export const figures = (verdict: ResultFigures['verdict'], timeMs: number): ResultFigures => ({
  verdict,
  timeMs,
  memoryKb: 10,
  outputHash: null,
  exceptionType: null,
  isolated: true,
  cached: false,
});
