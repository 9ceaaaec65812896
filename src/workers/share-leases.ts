/**
 * The leases of a role split in shares (the Judge by problem): each share has a lease of its
 * own, renewed every third of its length while held. A process that holds no share takes the
 * first free one, starting from its preferred share; a share seen free for a whole lease
 * length (its holder died, or it never had one) is taken by any live process, so the work of a
 * dead process moves to the others within about two lease lengths, and the supervisor's
 * replacement, holding none, takes a free share at once.
 */
import type { Lease, WorkerBoard } from '../events/jetstream/jetstream-board.js';
import { shareLeaseName } from '../core/judge-shares.js';

export class ShareLeases {
  readonly #held = new Map<number, Lease>();
  /** When this process first saw each unheld share free (by its clock). */
  readonly #freeSince = new Map<number, number>();
  #timer: NodeJS.Timeout | null = null;
  #busy = false;
  #stopped = false;

  constructor(
    private readonly board: WorkerBoard,
    private readonly role: string,
    private readonly holder: string,
    readonly shares: number,
    readonly ttlMs: number,
    private readonly preferred: number,
    private readonly onChange: (held: readonly number[]) => void,
  ) {}

  /** The shares held now, ascending. */
  get held(): number[] {
    return [...this.#held.entries()]
      .filter(([, l]) => l.heldFor(0))
      .map(([s]) => s)
      .sort((a, b) => a - b);
  }

  holds(share: number): boolean {
    return this.#held.get(share)?.heldFor(0) ?? false;
  }

  /** True when `share` is ours for at least `marginMs` more, renewing it first if need be. */
  async ensure(share: number, marginMs: number): Promise<boolean> {
    const lease = this.#held.get(share);
    if (!lease) return false;
    if (lease.heldFor(marginMs)) return true;
    if (await lease.renew()) return true;
    this.#drop(share, lease);
    return false;
  }

  async start(): Promise<void> {
    await this.#tick();
    this.#timer = setInterval(() => void this.#tick(), Math.max(50, Math.floor(this.ttlMs / 3)));
  }

  #drop(share: number, lease: Lease): void {
    if (this.#held.get(share) !== lease) return;
    this.#held.delete(share);
    this.onChange(this.held);
  }

  async #tick(): Promise<void> {
    if (this.#busy || this.#stopped) return;
    this.#busy = true;
    try {
      for (const [share, lease] of [...this.#held]) if (!(await lease.renew())) this.#drop(share, lease);
      let changed = false;
      for (let k = 0; k < this.shares && !this.#stopped; k++) {
        const share = (this.preferred + k) % this.shares;
        if (this.#held.has(share)) continue;
        const name = shareLeaseName(this.role, share);
        const holder = await this.board.holderOf(name);
        if (holder !== null && holder !== this.holder) {
          this.#freeSince.delete(share);
          continue;
        }
        const now = Date.now();
        const since = this.#freeSince.get(share) ?? now;
        this.#freeSince.set(share, since);
        if (this.#held.size > 0 && now - since < this.ttlMs) continue;
        const lease = await this.board.acquire(name, this.holder, this.ttlMs);
        if (!lease) continue;
        if (this.#stopped) {
          await lease.release();
          break;
        }
        this.#held.set(share, lease);
        this.#freeSince.delete(share);
        changed = true;
      }
      if (changed) this.onChange(this.held);
    } catch {
      // The server is away: held leases lapse by themselves; the next tick tries again.
    } finally {
      this.#busy = false;
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    const held = [...this.#held.values()];
    this.#held.clear();
    await Promise.all(held.map((l) => l.release().catch(() => undefined)));
  }
}
