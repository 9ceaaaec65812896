/**
 * What a snapshot's side rows cost to save once the table is large: the Judge's and the
 * Executor's rows (see src/actors/pair-rows.ts), one per recorded result, keyed by a program's
 * number so that a save's fresh programs' results go to the end of the b-tree, against the
 * baseline of the same rows keyed by scope, program hash and test hash (the format before),
 * whose random keys spread a save over the whole table. Both in the same run, through the same snapshot table
 * (WAL, synchronous FULL), one after the other: the table is first filled with `--rows`
 * thousand results saved `--save` thousand at a time, then `--saves` more saves are measured.
 *
 *   npm run bench -- side-rows [--rows 2000] [--save 200] [--saves 3] [--problems 256]
 *
 * A save at Code-A1's full size writes about 800,000 rows (a snapshot every 20,000 events, both
 * actors) into a table of up to 45 million.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PairRows, encodeFigures } from '../src/actors/pair-rows.js';
import { SqliteSnapshotTable, type SideRows } from '../src/actors/snapshots.js';
import type { ResultFigures } from '../src/projections/recorded-verdicts.js';
import { flag } from './flags.js';
import { bytesWritten } from './storage.js';

/** New tests of a problem in a step (8 suites of 8). */
const TESTS_PER_PROGRAM = 64;

const hashOf = (text: string) => createHash('sha256').update(text).digest('hex');

/** The results of save `k`, in Code-A1's shape: in each problem, 8 fresh programs run on the
 * problem's 64 new tests, and so are the problem's reference and its oracle run (programs that
 * live all run long), until `perSave` results. */
function* resultsOf(k: number, perSave: number, problems: number): Generator<[scope: string, program: string, test: string, figures: ResultFigures]> {
  let n = 0;
  for (let p = 0; n < perSave; p = (p + 1) % problems) {
    const scope = `problem-${String(p).padStart(4, '0')}`;
    const programs = [hashOf(`reference ${scope} a`), hashOf(`reference ${scope} b`)];
    for (let s = 0; s < 8; s++) programs.push(hashOf(`program ${k} ${p} ${s} ${n}`));
    for (let t = 0; t < TESTS_PER_PROGRAM; t++) {
      const test = hashOf(`test ${k} ${p} ${t} ${n}`);
      for (const [i, program] of programs.entries()) {
        yield [scope, program, test, { verdict: (t + i) % 3 === 0 ? 'wrong_answer' : 'accepted', timeMs: 5 + (t % 40), memoryKb: 9000 + p, outputHash: null, exceptionType: null, isolated: true, cached: false }];
        n++;
      }
    }
  }
}

/** The baseline's key: kind, scope and both hashes (the layout before programs had numbers). */
function hashKey(scope: string, program: string, test: string): Buffer {
  const s = Buffer.from(scope, 'utf8');
  return Buffer.concat([Buffer.of(0x70, s.length), s, Buffer.from(program, 'hex'), Buffer.from(test, 'hex')]);
}

interface Layout {
  name: string;
  /** The side rows of save `k`. */
  rowsOf(k: number): SideRows;
  saved(table: SqliteSnapshotTable): void;
}

function numbered(perSave: number, problems: number): Layout {
  const rows = new PairRows<ResultFigures>(null, (r) => r);
  return {
    name: "programs' numbers (this code)",
    rowsOf(k) {
      for (const [scope, program, test, figures] of resultsOf(k, perSave, problems)) rows.record(scope, program, test, figures);
      return rows.sideRows();
    },
    saved: (table) => rows.sideSaved(table.side('judge')),
  };
}

function hashed(perSave: number, problems: number): Layout {
  let first = true;
  return {
    name: 'baseline, hashes as keys',
    rowsOf(k) {
      const rows: [Uint8Array, Uint8Array][] = [];
      for (const [scope, program, test, figures] of resultsOf(k, perSave, problems)) rows.push([hashKey(scope, program, test), encodeFigures(figures)]);
      const replace = first;
      first = false;
      return { replace, rows };
    },
    saved: () => {},
  };
}

export async function runBench(args: string[]): Promise<void> {
  const existing = flag(args, 'rows', 2000) * 1000;
  const perSave = flag(args, 'save', 200) * 1000;
  const saves = flag(args, 'saves', 3);
  const problems = flag(args, 'problems', 256);
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-side-rows-'));
  console.log(`side rows: a table filled with ${existing.toLocaleString('en')} results, then ${saves} saves of ${perSave.toLocaleString('en')} measured (${problems} problems; in each, 8 fresh programs and 2 long-lived ones run on ${TESTS_PER_PROGRAM} new tests a save)`);
  try {
    for (const make of [numbered, hashed]) {
      const layout = make(perSave, problems);
      const file = path.join(root, `${make.name}.db`);
      const table = new SqliteSnapshotTable(file, 'bench');
      const save = (k: number) => {
        table.save([{ ref: { actor: 'judge', position: (k + 1) as never, hash: '0'.repeat(64), version: 'bench' }, body: Buffer.from('{}'), side: layout.rowsOf(k) }]);
        layout.saved(table);
      };
      const fill = Math.ceil(existing / perSave);
      const f0 = performance.now();
      for (let k = 0; k < fill; k++) save(k);
      const fillSeconds = (performance.now() - f0) / 1000;
      const w0 = bytesWritten();
      const t0 = performance.now();
      for (let k = fill; k < fill + saves; k++) save(k);
      const ms = (performance.now() - t0) / saves;
      const w1 = bytesWritten();
      table.close();
      const rows = (fill + saves) * perSave;
      const bytes = statSync(file).size;
      const written = w0 === null || w1 === null ? 'n/a' : `${((w1 - w0) / saves / 1e6).toFixed(0)} MB`;
      console.log(`  ${layout.name}: ${ms.toFixed(0)} ms a save, ${written} written to storage a save; filling took ${fillSeconds.toFixed(1)} s; file ${(bytes / rows).toFixed(1)} bytes per result`);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
