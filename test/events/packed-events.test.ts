/**
 * The packed stored form of list-heavy events: lossless on any JSON, and a log written in the
 * previous plain shape (the versions before packing) replays to the same read models.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { runExperiment } from '../../src/actors/run.js';
import { catalog } from '../../src/events/catalog.js';
import { rowChecksum } from '../../src/events/commit.js';
import { MalformedEventError } from '../../src/events/errors.js';
import { packJson, unpackJson, type Json } from '../../src/events/packed-json.js';
import { RESOLVED_COMMIT_COLUMNS, openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { dataText } from '../../src/events/sqlite/stored-data.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../../src/projections/run-views.js';
import { smallConfig } from '../support/small-config.js';

v8.setFlagsFromString('--expose-gc');

const roundTrip = (x: Json) => JSON.stringify(unpackJson(JSON.parse(JSON.stringify(packJson(x))) as Json));

function randomJson(rng: Rng, depth: number): Json {
  const hex = () => Array.from({ length: 64 }, () => '0123456789abcdef'[rng.int(16)]).join('');
  const leaf = (): Json => {
    switch (rng.int(9)) {
      case 0:
        return null;
      case 1:
        return rng.int(2) === 0;
      case 2:
        return rng.int(5) - 2;
      case 3:
        return rng.next() * 100;
      case 4:
        return hex();
      case 5:
        return `id/${rng.int(3)}/${rng.int(12)}`;
      case 6:
        return ['ok', 'fail', '~', '0', '007', ''][rng.int(6)]!;
      case 7:
        return rng.int(2) === 0 ? Number.MAX_SAFE_INTEGER - rng.int(3) : 2 ** 60;
      default:
        return 'x'.repeat(rng.int(4));
    }
  };
  if (depth === 0) return leaf();
  switch (rng.int(4)) {
    case 0:
      return leaf();
    case 1: {
      // A list of rows with the same keys (a table), sometimes with a marker-like key.
      const keys = ['a', 'b', rng.int(4) === 0 ? '~t' : 'c'].slice(0, 1 + rng.int(3));
      const kind = rng.int(7);
      return Array.from({ length: rng.int(12) }, (_, i) =>
        Object.fromEntries(
          keys.map((k) => [
            k,
            kind === 0 ? `s/${i}` : kind === 1 ? i * 3 : kind === 2 ? `r/${i >> 2}x` : kind === 3 ? (i % 5 === 0 ? 'x' : `s/${i}`) : randomJson(rng, depth - 1),
          ]),
        ),
      );
    }
    case 2:
      if (rng.int(4) === 0) {
        // Ids derived from a hash of the same row, now and then broken.
        const same = rng.int(2) === 0;
        return Array.from({ length: 1 + rng.int(6) }, () => {
          const h = hex();
          return { id: `o/${h.slice(0, 16 + (rng.int(8) === 0 ? 1 : 0))}`, h, g: same ? h : hex() };
        });
      }
      return rng.int(3) === 0
        ? Array.from({ length: 2 * rng.int(10) }, (_, i) => (i % 2 === 0 ? rng.int(2) : i + rng.int(2)))
        : Array.from({ length: rng.int(10) }, () => randomJson(rng, depth - 1));
    default: {
      const o: Record<string, Json> = {};
      for (let i = rng.int(7); i > 0; i--)
        o[['k', '~o', '~h', '1', '2', '10', 'z'][rng.int(7)]! + (rng.int(3) === 0 ? String(i) : '')] = randomJson(rng, depth - 1);
      return o;
    }
  }
}

describe('packed JSON', () => {
  it('gives back any JSON value exactly, keys in the same order', () => {
    for (let seed = 0; seed < 400; seed++) {
      const x = randomJson(Rng.derive(seed, 'packed-json'), 4);
      expect(roundTrip(x), `seed ${seed}`).toBe(JSON.stringify(x));
    }
  });

  it('stores lists of rows as columns, hashes as base64, counted ids and integer steps as runs', () => {
    const hash = (i: number) => i.toString(16).padStart(64, '0');
    const tests = Array.from({ length: 64 }, (_, i) => ({
      testId: `1/p7/s${i >> 3}/t/${i % 8}`,
      testHash: hash(i),
      valid: i % 5 !== 0,
      oracleHash: i === 3 ? null : hash(1000 + i),
    }));
    const kill = tests.map((t) => ({ testId: `oracle/${t.testHash.slice(0, 16)}`, testHash: t.testHash }));
    expect(JSON.stringify(packJson(kill))).toContain('{"~p":["oracle/",1,16]}');
    expect(roundTrip(kill)).toBe(JSON.stringify(kill));
    const data = { tests, pairs: tests.flatMap((_, i) => [0, i]), verdicts: 'AAW', outputs: Object.fromEntries(tests.map((t, i) => [String(i), t.testHash])) };
    const plain = JSON.stringify(data).length;
    const packed = JSON.stringify(packJson(data)).length;
    expect(packed).toBeLessThan(plain * 0.55);
    expect(JSON.stringify(packJson(data.pairs))).toBe('{"~a2":[[0,0,64],[0,1,64]]}');
    expect(roundTrip(data)).toBe(JSON.stringify(data));
  });

  it('gives each unpacked hash a string of its own: one hash kept does not keep its whole list', () => {
    // A slice of the list's hex would hold the list in memory while any hash of it is kept (a
    // cache key, an actor's state): here 200 lists of 2,000 hashes, 25 MB of hex, one hash each kept.
    const gc = vm.runInNewContext('gc') as () => void;
    const list = (n: number) => Array.from({ length: 2000 }, (_, i) => createHash('sha256').update(`${n}/${i}`).digest('hex'));
    const packed = Array.from({ length: 200 }, (_, n) => JSON.stringify(packJson(list(n))));
    gc();
    const before = process.memoryUsage().heapUsed;
    const kept = packed.map((p) => (unpackJson(JSON.parse(p) as Json) as string[])[1234]!);
    gc();
    const retained = process.memoryUsage().heapUsed - before;
    expect(kept).toHaveLength(200);
    expect(kept.every((h) => /^[0-9a-f]{64}$/.test(h))).toBe(true);
    expect(retained).toBeLessThan(4_000_000);
  });

  it('a marker it does not know is an error, not data', () => {
    expect(() => unpackJson({ '~q': 1 })).toThrow(/unknown marker ~q/);
    // An object of the data whose key looks like a marker is stored escaped.
    expect(JSON.stringify(packJson({ '~q': 1 }))).toBe('{"~o":{"~q":1}}');
  });
});

describe('packed events in a run log', () => {
  let root: string;
  let logPath: string;
  let runId: string;
  const packedTypes = catalog.types().filter((t) => catalog.specs[t as keyof typeof catalog.specs].packed);

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'crucible-packed-'));
    const outcome = await runExperiment({ config: smallConfig(root), dir: path.join(root, 'run'), cacheDir: null });
    logPath = path.join(outcome.dir, 'log.db');
    runId = outcome.runId;
  }, 120_000);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('a log of the previous plain shape replays to the same read models', async () => {
    expect(packedTypes).toEqual(expect.arrayContaining(['ExecutionRequested', 'ProgramExecuted', 'TestsSampled', 'TestsJudged']));
    // The old-shape log: every packed row rewritten as the version before packing stored it.
    const oldPath = path.join(root, 'old-shape.db');
    copyFileSync(logPath, oldPath);
    const db = new Database(oldPath);
    const rows = db
      .prepare(
        `SELECT position, id, ${RESOLVED_COMMIT_COLUMNS}, stream, type, v, run_id, causation_id, correlation_id, data FROM events e WHERE type IN (${packedTypes.map(() => '?').join(',')})`,
      )
      .all(...packedTypes) as Record<string, string | number | Buffer | null>[];
    expect(rows.length).toBeGreaterThan(20);
    const update = db.prepare('UPDATE events SET v = ?, data = ?, sum = ? WHERE position = ?');
    db.transaction(() => {
      for (const r of rows) {
        const type = r.type as string;
        const v = (r.v as number) - 1;
        const data = JSON.stringify(catalog.fromStored(type, JSON.parse(dataText(r.data as string | Buffer)), {}));
        expect(data).not.toContain('"~');
        const stored = {
          id: r.id as string,
          type,
          v,
          runId: r.run_id as string,
          causationId: r.causation_id as string | null,
          correlationId: r.correlation_id as string | null,
          at: r.at as string,
          data,
        };
        update.run(v, data, rowChecksum(stored, r.stream as string, r.commit_id as string), r.position);
      }
    })();
    db.close();

    const hashes = async (file: string, views: string) => {
      const log = await openSqliteLog(file, { create: false });
      const runner = await ProjectionRunner.replayInto(path.join(root, views), { log, projections: RUN_PROJECTIONS, runId });
      const out: Record<string, string> = {};
      for (const p of RUN_PROJECTIONS) out[p.name] = await runner.stateHash(p.name);
      const events = [];
      for await (const e of log.read()) events.push([e.type, e.v, e.data]);
      await runner.close();
      await log.close();
      return { out, events };
    };
    const now = await hashes(logPath, 'views-now.db');
    const old = await hashes(oldPath, 'views-old.db');
    expect(old.out).toEqual(now.out);
    expect(old.events).toEqual(now.events);
  });

  it('a packed row that does not unpack is reported with its position', async () => {
    const badPath = path.join(root, 'bad.db');
    copyFileSync(logPath, badPath);
    const db = new Database(badPath);
    const r = db
      .prepare(
        `SELECT position, id, ${RESOLVED_COMMIT_COLUMNS}, stream, type, v, run_id, causation_id, correlation_id FROM events e WHERE type = 'TestsJudged' LIMIT 1`,
      )
      .get() as Record<string, string | number | null>;
    const data = '{"round":1,"problemId":"p","tests":{"~q":[]}}';
    const stored = {
      id: r.id as string,
      type: 'TestsJudged',
      v: r.v as number,
      runId: r.run_id as string,
      causationId: r.causation_id as string | null,
      correlationId: r.correlation_id as string | null,
      at: r.at as string,
      data,
    };
    // Even with a matching checksum (as if this code wrote it), the row is not trusted blindly.
    db.prepare('UPDATE events SET data = ?, sum = sum - (sum % 4294967296) + ? WHERE position = ?').run(
      data,
      rowChecksum(stored, r.stream as string, r.commit_id as string),
      r.position,
    );
    db.close();
    const log = await openSqliteLog(badPath, { create: false });
    try {
      const read = async () => {
        for await (const _ of log.read()) void _;
      };
      const err = await read().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MalformedEventError);
      expect(String((err as Error).message)).toMatch(new RegExp(`position ${r.position}[^0-9].*unknown marker ~q|unknown marker ~q.*position ${r.position}`));
    } finally {
      await log.close();
    }
  });

  it('stores long event data deflated; a deflated row with a changed byte is reported with its position', async () => {
    const db0 = new Database(logPath, { readonly: true });
    const deflated = db0.prepare("SELECT position, data FROM events WHERE typeof(data) = 'blob' ORDER BY position LIMIT 1").get() as
      { position: number; data: Buffer } | undefined;
    const texts = db0.prepare("SELECT count(*) FROM events WHERE typeof(data) = 'text'").pluck().get() as number;
    db0.close();
    expect(deflated).toBeDefined();
    expect(texts).toBeGreaterThan(0);
    expect(dataText(deflated!.data).startsWith('{')).toBe(true);

    for (const [name, change] of [
      ['truncated', (b: Buffer) => b.subarray(0, b.length >> 1)],
      [
        'flipped',
        (b: Buffer) => {
          const c = Buffer.from(b);
          c[c.length >> 1]! ^= 0x40;
          return c;
        },
      ],
    ] as const) {
      const badPath = path.join(root, `bad-deflated-${name}.db`);
      copyFileSync(logPath, badPath);
      const db = new Database(badPath);
      db.prepare('UPDATE events SET data = ? WHERE position = ?').run(change(deflated!.data), deflated!.position);
      db.close();
      const log = await openSqliteLog(badPath, { create: false });
      try {
        const read = async () => {
          for await (const _ of log.read()) void _;
        };
        const err = await read().catch((e: unknown) => e);
        expect(err, name).toBeInstanceOf(MalformedEventError);
        expect((err as MalformedEventError).position, name).toBe(deflated!.position);
      } finally {
        await log.close();
      }
    }
  });
});
