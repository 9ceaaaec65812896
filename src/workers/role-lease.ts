/**
 * A singleton role's lease, kept on a timer independent of the work: renewed every third of
 * its length while held; while not held, taken as soon as it is free or lapsed (the standby
 * takes over from a holder that died).
 */
import type { Lease, WorkerBoard } from '../events/jetstream/jetstream-board.js';

export class RoleLease {
  #lease: Lease | null = null;
  #timer: NodeJS.Timeout | null = null;
  #busy = false;
  #stopped = false;

  constructor(
    private readonly board: WorkerBoard,
    private readonly name: string,
    private readonly holder: string,
    readonly ttlMs: number,
    private readonly onChange: (live: boolean) => void,
  ) {}

  get live(): boolean {
    return this.#lease?.heldFor(0) ?? false;
  }

  /** Tries at once, then on the timer. */
  async start(): Promise<void> {
    await this.#tick();
    this.#timer = setInterval(() => void this.#tick(), Math.max(50, Math.floor(this.ttlMs / 3)));
  }

  /** True when the lease is ours for at least `marginMs` more, renewing it first if needed. */
  async ensure(marginMs: number): Promise<boolean> {
    const lease = this.#lease;
    if (!lease) return false;
    if (lease.heldFor(marginMs)) return true;
    if (await lease.renew()) return true;
    this.#drop(lease);
    return false;
  }

  /** Forgets `lease` when it is still the one held (the timer may have taken a new one meanwhile). */
  #drop(lease: Lease): void {
    if (this.#lease !== lease) return;
    this.#lease = null;
    this.onChange(false);
  }

  async #tick(): Promise<void> {
    if (this.#busy || this.#stopped) return;
    this.#busy = true;
    try {
      if (this.#lease) {
        const lease = this.#lease;
        if (!(await lease.renew())) this.#drop(lease);
      } else {
        const lease = await this.board.acquire(this.name, this.holder, this.ttlMs);
        if (lease && !this.#stopped) {
          this.#lease = lease;
          this.onChange(true);
        } else await lease?.release();
      }
    } catch {
      // The server is away: a held lease lapses by itself; the next tick tries again.
    } finally {
      this.#busy = false;
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    const lease = this.#lease;
    this.#lease = null;
    await lease?.release().catch(() => undefined);
  }
}
