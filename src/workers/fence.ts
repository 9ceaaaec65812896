/**
 * Writes of a singleton role (Conductor, Judge, Learner), fenced twice:
 * - only while this process holds the role's lease (with a margin before it lapses), and
 * - with optimistic concurrency on the role's own log stream: each append expects the stream's
 *   last position this process saw, so a copy that lost its lease while paused and resumes
 *   cannot append after the copy that took over has written.
 * A fenced or duplicate append is not an error: the worker refolds, and the work is either in
 * the log (someone wrote it) or still pending (it runs again under the new holder).
 */
import type { CommitRequest, EventLog, Position } from '../events/log.js';
import { ConcurrencyError } from '../events/errors.js';

export type FencedResult = 'written' | 'duplicate' | 'fenced';

export class FencedWriter {
  #expected: Position | null = null;
  #chain: Promise<unknown> = Promise.resolve();
  readonly #log: EventLog;
  /** True when this process may write now (it holds the lease, renewed if need be). */
  readonly #mayWrite: () => Promise<boolean>;

  constructor(log: EventLog, mayWrite: () => Promise<boolean>) {
    this.#log = log;
    this.#mayWrite = mayWrite;
  }

  /** Appends one commit (one at a time per process, so each expects the previous one's end). */
  append(commit: CommitRequest): Promise<FencedResult> {
    const next = this.#chain.then(() => this.#append(commit));
    this.#chain = next.catch(() => undefined);
    return next;
  }

  /** Forget the stream position (another holder may have written since). */
  reset(): void {
    this.#expected = null;
  }

  async #append(commit: CommitRequest): Promise<FencedResult> {
    if (!(await this.#mayWrite())) return 'fenced';
    if (this.#expected === null) this.#expected = await this.#log.streamHead(commit.stream);
    try {
      const r = await this.#log.append(commit.stream, commit.events, { ...commit.options, expectedPosition: this.#expected });
      if (r.duplicate) {
        this.#expected = null;
        return 'duplicate';
      }
      this.#expected = r.positions.at(-1)!;
      return 'written';
    } catch (err) {
      if (!(err instanceof ConcurrencyError)) throw err;
      this.#expected = null;
      return 'fenced';
    }
  }
}
