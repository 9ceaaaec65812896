import type { SideReader, SideRows } from '../../src/actors/snapshots.js';

/** Side rows as a snapshot table keeps them: saved rows replace rows under the same key. */
export function sideTable() {
  const rows = new Map<string, string>();
  const sorted = () => [...rows].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return {
    save(side: SideRows) {
      if (side.replace) rows.clear();
      for (const [k, v] of side.rows) rows.set(k, v);
    },
    reader(): SideReader {
      return {
        get: (key) => rows.get(key),
        all: () => sorted()[Symbol.iterator](),
        withPrefix: (prefix) => sorted().filter(([k]) => k.startsWith(prefix))[Symbol.iterator](),
      };
    },
  };
}
