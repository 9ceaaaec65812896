import { ForkServer, type WorkerOptions } from './worker.js';

/** A fixed number of fork-servers; callers wait in FIFO order for one (back-pressure: at most
 * `size` tests run at once, whatever the number of callers). Dead servers are replaced. */
export class ServerPool {
  readonly #idle: ForkServer[] = [];
  readonly #waiters: Array<(s: ForkServer) => void> = [];
  readonly #all = new Set<ForkServer>();
  readonly #freeSlots: number[];
  #closed = false;

  constructor(
    readonly size: number,
    readonly base: Omit<WorkerOptions, 'slot'>,
    slotOffset: number,
  ) {
    this.#freeSlots = Array.from({ length: size }, (_, i) => slotOffset + i);
  }

  /** Callers waiting for a server. */
  get waiting(): number {
    return this.#waiters.length;
  }

  async acquire(): Promise<ForkServer> {
    if (this.#closed) throw new Error('sandbox is closed');
    while (this.#idle.length > 0) {
      const s = this.#idle.pop()!;
      if (s.alive) return s;
      this.#retire(s);
    }
    if (this.#freeSlots.length > 0) return this.#spawn();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  release(s: ForkServer): void {
    if (!s.alive || this.#closed) {
      this.#retire(s);
      if (this.#waiters.length > 0 && !this.#closed) this.#waiters.shift()!(this.#spawn());
      return;
    }
    const w = this.#waiters.shift();
    if (w) w(s);
    else this.#idle.push(s);
  }

  #spawn(): ForkServer {
    const slot = this.#freeSlots.shift()!;
    const s = new ForkServer({ ...this.base, slot });
    this.#all.add(s);
    return s;
  }

  #retire(s: ForkServer): void {
    if (!this.#all.delete(s)) return;
    s.kill();
    this.#freeSlots.push(s.opts.slot);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#all].map((s) => s.close()));
    this.#all.clear();
  }
}
