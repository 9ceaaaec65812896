import type { SideReader, SideRows } from '../../src/actors/snapshots.js';

/** Side rows as a snapshot table keeps them: saved rows replace rows under the same key. */
export function sideTable() {
  // By key in hex: hex sorts as the bytes do.
  const rows = new Map<string, Uint8Array>();
  const sorted = () => [...rows].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([k, v]): [Uint8Array, Uint8Array] => [Buffer.from(k, 'hex'), v]);
  const hex = (key: Uint8Array) => Buffer.from(key).toString('hex');
  return {
    save(side: SideRows) {
      if (side.replace) rows.clear();
      for (const [k, v] of side.rows) rows.set(hex(k), v);
    },
    reader(): SideReader {
      return {
        get: (key) => rows.get(hex(key)),
        getMany: (keys) => keys.map((key) => rows.get(hex(key))),
        all: () => sorted()[Symbol.iterator](),
      };
    },
  };
}
