/**
 * Order by content, never by arrival: where an actor collects events into a list that feeds a
 * decision (a reward group, a tie-break, a batch, an event's content), it keeps the list sorted
 * by an id carried in the events, so that many processes, whose outputs reach the log in any
 * order, all decide the same.
 */

const CHUNKS = /(\d+)|(\D+)/g;

/** Ids compared chunk by chunk, numbers as numbers ("s2" before "s10"), so ids built from
 * indices keep their indices' order; code-unit order otherwise (no locale). */
export function compareIds(a: string, b: string): number {
  if (a === b) return 0;
  const xs = a.match(CHUNKS) ?? [];
  const ys = b.match(CHUNKS) ?? [];
  for (let i = 0; i < Math.min(xs.length, ys.length); i++) {
    const x = xs[i]!;
    const y = ys[i]!;
    if (x === y) continue;
    const dx = /^\d/.test(x);
    const dy = /^\d/.test(y);
    if (dx && dy) {
      // Compare as whole numbers of any length: shorter (without leading zeros) is smaller.
      const nx = x.replace(/^0+(?=\d)/, '');
      const ny = y.replace(/^0+(?=\d)/, '');
      if (nx.length !== ny.length) return nx.length - ny.length;
      if (nx !== ny) return nx < ny ? -1 : 1;
      // Same number, different zeros: fall through to code-unit order of the chunks.
    }
    return x < y ? -1 : 1;
  }
  if (xs.length !== ys.length) return xs.length - ys.length;
  return a < b ? -1 : 1;
}

/** A copy of `items` with `item` inserted at its place by `idOf` (after equal ids). */
export function insertById<T>(items: readonly T[], item: T, idOf: (x: T) => string): T[] {
  const id = idOf(item);
  let at = items.length;
  while (at > 0 && compareIds(idOf(items[at - 1]!), id) > 0) at--;
  return [...items.slice(0, at), item, ...items.slice(at)];
}

/** A sorted copy by id. */
export function sortById<T>(items: readonly T[], idOf: (x: T) => string): T[] {
  return [...items].sort((a, b) => compareIds(idOf(a), idOf(b)));
}
