/** The blob store's memory of recent blobs: bytes copied into chunks, forgotten oldest first. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RecentBlobs } from '../../src/events/sqlite/recent-blobs.js';

const MB = 1 << 20;
const hashOf = (i: number) => createHash('sha256').update(String(i)).digest('hex');
const blobOf = (i: number, size: number) => Buffer.alloc(size, i % 251);

describe('recent blobs', () => {
  it('gives back the bytes kept, as copies: a view into a larger buffer does not stay in memory through them', () => {
    const recent = new RecentBlobs(4 * MB);
    const pack = Buffer.from('first|second|third');
    recent.set(hashOf(1), pack.subarray(6, 12));
    recent.set(hashOf(2), new Uint8Array(0));
    pack.fill(0);
    expect(recent.get(hashOf(1))!.toString()).toBe('second');
    expect(recent.get(hashOf(1))!.buffer).not.toBe(pack.buffer);
    expect(recent.get(hashOf(2))!.byteLength).toBe(0);
    expect(recent.get(hashOf(3))).toBeUndefined();
    expect([recent.has(hashOf(1)), recent.has(hashOf(3)), recent.size]).toEqual([true, false, 2]);
  });

  it('forgets the oldest blobs first, a chunk at a time, counting each entry beyond its bytes', () => {
    const recent = new RecentBlobs(4 * MB);
    // 1,000-byte blobs: about 1,040 per chunk and, with what an entry costs, about 3,600 in 4 MB.
    const n = 10_000;
    const early = blobOf(0, 1000);
    recent.set(hashOf(0), early);
    const view = recent.get(hashOf(0))!;
    for (let i = 1; i < n; i++) recent.set(hashOf(i), blobOf(i, 1000));
    const kept = Array.from({ length: n }, (_, i) => recent.has(hashOf(i)));
    const first = kept.indexOf(true);
    // What is kept is the newest, without a gap, within the bound.
    expect(kept.slice(first).every(Boolean)).toBe(true);
    expect(n - first).toBe(recent.size);
    expect(recent.size * (1000 + 4)).toBeLessThanOrEqual(4 * MB);
    expect(recent.size).toBeGreaterThan(2_500);
    for (const i of [first, n - 1]) expect(recent.get(hashOf(i))!.equals(blobOf(i, 1000))).toBe(true);
    // A view handed out before its chunk was forgotten still holds its bytes.
    expect(view.equals(early)).toBe(true);
  });

  it('does not keep a blob larger than a chunk, nor a hash twice', () => {
    const recent = new RecentBlobs(4 * MB);
    recent.set(hashOf(1), Buffer.alloc(MB));
    expect(recent.has(hashOf(1))).toBe(false);
    recent.set(hashOf(2), Buffer.from('a'));
    recent.set(hashOf(2), Buffer.from('b'));
    expect(recent.get(hashOf(2))!.toString()).toBe('a');
    expect(recent.size).toBe(1);
  });
});
