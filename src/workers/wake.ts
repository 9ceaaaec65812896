/**
 * Wakes a worker when the log moves: a subscription from the worker's position whose items are
 * only a signal (the worker then folds what is new), so an idle worker waits instead of polling
 * or exiting. Other signals (an effect finished) share it.
 */
import type { EventLog, Position, Subscription } from '../events/log.js';

export class Wake {
  #pending = false;
  #resolve: (() => void) | null = null;
  #sub: Subscription | null = null;
  #closed = false;

  /** Listens to the log after `after` (the run's events only). */
  listen(log: EventLog, runId: string, after: Position): void {
    const sub = log.subscribe({ after, filter: { runId } });
    this.#sub = sub;
    void (async () => {
      try {
        for await (const _item of sub) {
          if (this.#closed) break;
          this.signal();
        }
      } catch {
        // The log closed under it (the worker is stopping); the fold loop reports real errors.
      }
    })();
  }

  signal(): void {
    this.#pending = true;
    const r = this.#resolve;
    this.#resolve = null;
    r?.();
  }

  /** Resolves at the next signal (at once if one came since the last wait), or after `ms`. */
  async wait(ms: number): Promise<void> {
    if (this.#pending || this.#closed) {
      this.#pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#resolve = null;
        resolve();
      }, ms);
      this.#resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#pending = false;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.signal();
    await this.#sub?.close();
  }
}
