/**
 * A watch on a reader waiting for its ordered consumer. nats.js replaces an ordered consumer
 * lost with its server (killed, cut off) only after two missed heartbeats, and not always at
 * once after that: a run's supervisor, subscribed through a server that was killed and another
 * that was cut off, waited 45 s and once more than its 180 s for events the stream held. So a
 * reader that has waited `ms` for a message asks the stream whether it holds one past what was
 * delivered, and if so gives up the consumer (the caller starts another from there).
 */
export interface StallWatch {
  /** The reader is waiting for the consumer's next message (from now). */
  waiting(): void;
  /** The reader has a message and is busy with it (its own slowness is not a stall). */
  busy(): void;
  stop(): void;
  /** True once the watch has given up the consumer. */
  readonly stalled: boolean;
}

/**
 * Every `ms`, while the reader has waited at least `ms`, asks `behind()` (true when the stream
 * holds a message the consumer has not delivered); when it says so, calls `giveUp` once. A
 * `behind()` that throws (the cluster unreachable for now) is asked again at the next check.
 */
export function watchForStall(ms: number, behind: () => Promise<boolean>, giveUp: () => void): StallWatch {
  let since: number | null = Date.now();
  let stalled = false;
  let asking = false;
  const timer = setInterval(
    () => {
      if (stalled || asking || since === null || Date.now() - since < ms) return;
      asking = true;
      behind()
        .then((yes) => {
          if (yes && since !== null && Date.now() - since >= ms && !stalled) {
            stalled = true;
            clearInterval(timer);
            giveUp();
          }
        })
        .catch(() => undefined)
        .finally(() => (asking = false));
    },
    Math.max(1, Math.floor(ms / 2)),
  );
  // A watch never keeps a process alive.
  timer.unref();
  return {
    waiting: () => (since = Date.now()),
    busy: () => (since = null),
    stop: () => clearInterval(timer),
    get stalled() {
      return stalled;
    },
  };
}
