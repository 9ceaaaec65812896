/**
 * A step scheduler that perturbs the order in which one process writes the log, so a test can
 * check that no decision depends on it. In a run of many processes, effects finish in
 * any order and their outputs reach the log in any order; in one process, the dispatcher runs
 * each step's effects together and appends their outputs in a fixed order, which would hide an
 * actor that reads arrival order. With this scheduler each step
 *   - runs only a seeded random part of the pending work (the rest waits for a later step, as
 *     if it finished later, after other events arrived), and
 *   - appends the outputs of what it ran in a seeded random order.
 * The same seed perturbs the same way, so a failing order can be run again.
 */
import { Rng } from '../../src/core/rng.js';
import type { StepScheduler } from '../../src/actors/step-scheduler.js';

export interface ShuffleOptions {
  /** Seed of the perturbation (not the run's seed). */
  seed: number;
  /** Chance that a pending effect waits for a later step (0: every effect runs at once).
   * At least one effect runs in every step, so the run always moves on. */
  deferChance?: number;
}

export class ShuffledScheduler implements StepScheduler {
  readonly #rng: Rng;
  readonly #defer: number;

  constructor(options: ShuffleOptions) {
    const defer = options.deferChance ?? 0;
    if (!(defer >= 0 && defer < 1)) throw new RangeError(`deferChance must be in [0, 1), got ${defer}`);
    this.#rng = new Rng(options.seed);
    this.#defer = defer;
  }

  /** The work this step runs: each item kept unless deferred, never none. */
  pick<T>(work: readonly T[]): T[] {
    if (this.#defer === 0 || work.length <= 1) return [...work];
    const kept = work.filter(() => this.#rng.next() >= this.#defer);
    return kept.length > 0 ? kept : [this.#rng.pick(work)];
  }

  /** The order in which this step's outputs are appended. */
  order<T>(outputs: readonly T[]): T[] {
    return this.#rng.shuffle(outputs);
  }
}
