/**
 * The subscription of the local backends (memory, SQLite): stored events after the checkpoint,
 * `caught-up`, then live batches each followed by `caught-up` at the head scanned. Woken at once
 * by appends in this process, and by polling for appends made by other processes.
 */
import type { EventEnvelope } from './envelope.js';
import type { Position, Subscription, SubscriptionItem } from './log.js';

export class WakeSubscription implements Subscription {
  #closed = false;
  #wake: (() => void) | null = null;
  #pending = false;

  constructor(
    private readonly after: Position,
    private readonly between: (after: Position, to: Position) => Iterable<EventEnvelope>,
    private readonly head: () => Position,
    private readonly listen: (wake: () => void) => () => void,
    private readonly logClosed: () => boolean,
    private readonly onClose: () => void,
    private readonly pollMs = 1000,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
    return this.#run();
  }

  async *#run(): AsyncGenerator<SubscriptionItem> {
    const unlisten = this.listen(() => this.#signal());
    let position = this.after;
    let first = true;
    try {
      while (!this.#closed && !this.logClosed()) {
        this.#pending = false;
        const head = this.head();
        if (head > position) {
          for (const event of this.between(position, head)) {
            if (this.#closed) return;
            yield { kind: 'event', event };
          }
          position = head;
          if (this.#closed) return;
          yield { kind: 'caught-up', position };
        } else if (first) {
          yield { kind: 'caught-up', position: head > position ? head : position };
        }
        first = false;
        if (this.#closed) return;
        if (!this.#pending) await this.#sleep();
      }
    } finally {
      unlisten();
      this.onClose();
    }
  }

  #signal(): void {
    this.#pending = true;
    this.#wake?.();
  }

  #sleep(): Promise<void> {
    return new Promise((resolveSleep) => {
      const timer = setTimeout(done, this.pollMs);
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.#wake = null;
        resolveSleep();
      }
      this.#wake = done;
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#wake?.();
  }
}
