/**
 * A map that forgets its oldest entries first, each in O(1).
 *
 * Evicting a Map's oldest key through `map.keys().next()` walks over every entry deleted before
 * it: V8 keeps deleted entries as holes until the table is rebuilt, so a cache of 200k entries
 * that evicts one per insert scans up to its whole size per eviction. At Code-A1's size that
 * made the caches of blobs and parsed tests cost more than the work they saved, and more with
 * every step of a run. Here the insertion order is a queue of its own.
 */
export class FifoCache<K, V> {
  readonly #map = new Map<K, V>();
  /** Keys in insertion order from `#head` on (those before it are evicted). */
  #order: K[] = [];
  #head = 0;

  get size(): number {
    return this.#map.size;
  }

  get(key: K): V | undefined {
    return this.#map.get(key);
  }

  has(key: K): boolean {
    return this.#map.has(key);
  }

  /** Adds an entry as the newest; a key already present keeps its place and takes the value. */
  set(key: K, value: V): this {
    if (!this.#map.has(key)) this.#order.push(key);
    this.#map.set(key, value);
    return this;
  }

  /** Removes and returns the oldest entry (undefined when empty). */
  shift(): [K, V] | undefined {
    if (this.#head >= this.#order.length) return undefined;
    const key = this.#order[this.#head]!;
    // The slot lets go of the key now, not when the queue compacts: until then the evicted front
    // would keep up to a whole cache's worth of keys alive (the parsed-test cache's 262,144).
    this.#order[this.#head] = undefined as K;
    this.#head++;
    // The evicted front of the queue goes once it is half of it: O(1) per shift, amortized.
    if (this.#head >= 1024 && this.#head * 2 >= this.#order.length) {
      this.#order = this.#order.slice(this.#head);
      this.#head = 0;
    }
    const value = this.#map.get(key)!;
    this.#map.delete(key);
    return [key, value];
  }

  clear(): void {
    this.#map.clear();
    this.#order = [];
    this.#head = 0;
  }
}
