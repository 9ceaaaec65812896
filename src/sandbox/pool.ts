import { ForkServer, type WorkerOptions } from './worker.js';

/** A fixed number of fork-servers. Each server runs one test at a time; up to `depth` callers
 * may hold one at once, so their requests queue in its pipe and it never idles waiting for Node
 * between them (pipelining). An idle server is always preferred to a queue; beyond size x depth
 * holders, callers wait in FIFO order (back-pressure). Dead servers are replaced. */
export class ServerPool {
  readonly #holders = new Map<ForkServer, number>();
  readonly #waiters: Array<(s: ForkServer) => void> = [];
  readonly #freeSlots: number[];
  #closed = false;

  constructor(
    readonly size: number,
    readonly base: Omit<WorkerOptions, 'slot'>,
    slotOffset: number,
    readonly depth = 2,
  ) {
    this.#freeSlots = Array.from({ length: size }, (_, i) => slotOffset + i);
  }

  /** Callers waiting for a server. */
  get waiting(): number {
    return this.#waiters.length;
  }

  async acquire(): Promise<ForkServer> {
    if (this.#closed) throw new Error('sandbox is closed');
    const s = this.#pick();
    if (s) {
      this.#holders.set(s, this.#holders.get(s)! + 1);
      return s;
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  release(s: ForkServer): void {
    const held = this.#holders.get(s);
    if (held === undefined) return; // retired already
    if (!s.alive || this.#closed) {
      if (held > 1) this.#holders.set(s, held - 1);
      else this.#retire(s);
    } else {
      this.#holders.set(s, held - 1);
    }
    while (this.#waiters.length > 0 && !this.#closed) {
      const next = this.#pick();
      if (!next) break;
      this.#holders.set(next, this.#holders.get(next)! + 1);
      this.#waiters.shift()!(next);
    }
  }

  /** The live server with the fewest holders under `depth` (a new one while slots are free
   * and every live one is busy), or undefined. */
  #pick(): ForkServer | undefined {
    let best: ForkServer | undefined;
    let bestHeld = this.depth;
    for (const [s, held] of this.#holders) {
      if (!s.alive) {
        if (held === 0) this.#retire(s);
        continue;
      }
      if (held < bestHeld) {
        best = s;
        bestHeld = held;
      }
    }
    if ((best === undefined || bestHeld > 0) && this.#freeSlots.length > 0) return this.#spawn();
    return best;
  }

  #spawn(): ForkServer {
    const slot = this.#freeSlots.shift()!;
    const s = new ForkServer({ ...this.base, slot });
    this.#holders.set(s, 0);
    return s;
  }

  #retire(s: ForkServer): void {
    if (!this.#holders.delete(s)) return;
    s.kill();
    this.#freeSlots.push(s.opts.slot);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#holders.keys()].map((s) => s.close()));
    this.#holders.clear();
  }
}
