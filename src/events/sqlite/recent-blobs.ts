/**
 * Blobs recently read or written, kept in memory by their hash up to a number of bytes.
 *
 * Their bytes are copied into chunks of a megabyte, and the oldest chunk is forgotten whole. A
 * Buffer per blob cost more than the blob: a few hundred bytes of objects for a test of sixty,
 * and a member of a pack, or a small Buffer from Node's shared pool, is a view that keeps the
 * whole pack or pool slab in memory for as long as the one blob is kept. Here an entry costs its
 * bytes, four for its length, its key and a map entry (ENTRY_COST, counted against the bound);
 * what `get` returns is a view into a chunk, which stays valid after the chunk is forgotten (a
 * chunk is never written again).
 */
const CHUNK_BYTES = 1 << 20;
/** What an entry costs beyond its bytes: its key (a 64-character string) and its map entry. */
const ENTRY_COST = 128;
/** Chunk ids are kept below this (a slot each), so a location is a small integer. */
const SLOTS = 1024;

interface Chunk {
  bytes: Buffer;
  keys: string[];
  /** Bytes and entry costs counted against the bound. */
  cost: number;
}

export class RecentBlobs {
  readonly #maxBytes: number;
  /** Chunks by slot (id % SLOTS); the live ones are #first ... #last. */
  readonly #bySlot = new Array<Chunk | undefined>(SLOTS);
  #first = 0;
  #last = -1;
  #used = CHUNK_BYTES;
  #cost = 0;
  /** Hash -> slot * CHUNK_BYTES + offset of its length prefix. */
  readonly #at = new Map<string, number>();

  constructor(maxBytes: number) {
    // At least two chunks: the one being filled and one before it.
    this.#maxBytes = Math.max(2 * CHUNK_BYTES, maxBytes);
  }

  get size(): number {
    return this.#at.size;
  }

  has(hash: string): boolean {
    return this.#at.has(hash);
  }

  get(hash: string): Buffer | undefined {
    const at = this.#at.get(hash);
    if (at === undefined) return undefined;
    const slot = Math.floor(at / CHUNK_BYTES);
    const offset = at - slot * CHUNK_BYTES;
    const chunk = this.#bySlot[slot]!.bytes;
    return chunk.subarray(offset + 4, offset + 4 + chunk.readUInt32LE(offset));
  }

  /** Keeps a copy of `bytes` (a blob larger than a chunk is not kept). */
  set(hash: string, bytes: Uint8Array): void {
    const need = 4 + bytes.byteLength;
    if (need > CHUNK_BYTES || this.#at.has(hash)) return;
    if (this.#used + need > CHUNK_BYTES) this.#open();
    const cost = need + ENTRY_COST;
    while (this.#cost + cost > this.#maxBytes && this.#first < this.#last) this.#forgetOldest();
    const slot = this.#last % SLOTS;
    const chunk = this.#bySlot[slot]!;
    chunk.bytes.writeUInt32LE(bytes.byteLength, this.#used);
    chunk.bytes.set(bytes, this.#used + 4);
    chunk.keys.push(hash);
    chunk.cost += cost;
    this.#cost += cost;
    this.#at.set(hash, slot * CHUNK_BYTES + this.#used);
    this.#used += need;
  }

  /** Starts a new chunk (a new one, not an old one rewritten: views handed out stay as they were). */
  #open(): void {
    if (this.#last - this.#first + 1 >= SLOTS) this.#forgetOldest();
    this.#last++;
    this.#bySlot[this.#last % SLOTS] = { bytes: Buffer.allocUnsafeSlow(CHUNK_BYTES), keys: [], cost: 0 };
    this.#used = 0;
  }

  #forgetOldest(): void {
    const slot = this.#first % SLOTS;
    const chunk = this.#bySlot[slot]!;
    for (const hash of chunk.keys) this.#at.delete(hash);
    this.#cost -= chunk.cost;
    this.#bySlot[slot] = undefined;
    this.#first++;
  }
}
