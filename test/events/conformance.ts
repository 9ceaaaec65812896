/**
 * The EventLog conformance suite, written once and run against every backend: a backend's test
 * file calls `describeEventLogConformance(name, factory)`. The factory makes a fresh, empty log;
 * `open` may be called many times to get more handles on the SAME log (reopen after close,
 * a second writer), each with the registry it is given (old code, new code).
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { catalog, makeEvent } from '../../src/events/catalog.js';
import { deriveEventId, type EventEnvelope, type NewEvent } from '../../src/events/envelope.js';
import {
  BlobNotFoundError,
  ConcurrencyError,
  DuplicateEventIdError,
  EmptyCommitError,
  InvalidBlobHashError,
  InvalidLogArgumentError,
  LogClosedError,
  MalformedEventError,
  UnknownEventTypeError,
  UnsupportedEventVersionError,
  CommitTooLargeError,
} from '../../src/events/errors.js';
import { ORIGIN, comparePositions, type EventLog, type Position, type ReadFilter, type ReadRange, type SubscriptionItem } from '../../src/events/log.js';
import { defineEvent, type EventCodec } from '../../src/events/registry.js';
import { readAtOf } from '../../src/events/read-at.js';

export interface LogFixture {
  /** A handle on this fixture's log; every call reaches the same stored events. */
  open(opts?: { registry?: EventCodec }): Promise<EventLog>;
  /** Deletes what the fixture created (its handles are closed first by the suite). */
  dispose(): Promise<void>;
}

const RUN = 'run-conf';
const HASH = (s: string) => createHash('sha256').update(s).digest('hex');

const round = (n: number, runId = RUN) => makeEvent('RoundStarted', runId, { round: n, problemIds: [`p${n}`] });
const failed = (reason: string, runId = RUN) => makeEvent('RunFailed', runId, { reason });

async function collect(it: AsyncIterable<EventEnvelope>): Promise<EventEnvelope[]> {
  const out: EventEnvelope[] = [];
  for await (const e of it) out.push(e);
  return out;
}

async function catchError(p: Promise<unknown> | (() => Promise<unknown>)): Promise<unknown> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

/** Reads a subscription until `until` says stop (checked after each item), then closes it. */
async function drain(
  log: EventLog,
  opts: { after?: Position; filter?: ReadFilter },
  until: (items: SubscriptionItem[]) => boolean,
): Promise<SubscriptionItem[]> {
  const sub = log.subscribe(opts);
  const items: SubscriptionItem[] = [];
  for await (const item of sub) {
    items.push(item);
    if (until(items)) break;
  }
  await sub.close();
  return items;
}

const eventsOf = (items: SubscriptionItem[]) => items.flatMap((i) => (i.kind === 'event' ? [i.event] : []));

/** Positions are opaque: a test only checks that they are strictly increasing. */
function expectIncreasing(ps: readonly Position[]): void {
  for (let i = 1; i < ps.length; i++) expect(comparePositions(ps[i - 1]!, ps[i]!)).toBeLessThan(0);
}

// SolutionSampled as it was at v1: no sampling.temperature.
const solutionV1Registry = catalog.extend({
  SolutionSampled: defineEvent({
    version: 1,
    schema: z.strictObject({
      round: z.int(),
      problemId: z.string(),
      solutionId: z.string(),
      programHash: z.string(),
      policy: z.strictObject({ role: z.enum(['code', 'test']), name: z.string(), version: z.int() }),
      sampling: z.strictObject({ seed: z.int(), index: z.int(), candidateId: z.string().nullable() }),
      responseHash: z.string().nullable(),
    }),
  }),
});

export function describeEventLogConformance(name: string, factory: () => Promise<LogFixture>): void {
  describe(`EventLog conformance: ${name}`, () => {
    let fixture: LogFixture;
    let handles: EventLog[];
    const open = async (opts?: { registry?: EventCodec }) => {
      const log = await fixture.open(opts);
      handles.push(log);
      return log;
    };

    beforeEach(async () => {
      handles = [];
      fixture = await factory();
    });
    afterEach(async () => {
      for (const h of handles) await h.close();
      await fixture.dispose();
    });

    describe('global order', () => {
      it('gives increasing positions across streams, in append order; head and stream heads follow', async () => {
        const log = await open();
        expect(await log.head()).toBe(ORIGIN);
        const a = await log.append('conductor', [round(0), round(1)], { commitId: 'c1' });
        const b = await log.append('judge/0', [failed('x')], { commitId: 'c2' });
        const c = await log.append('conductor', [round(2)], { commitId: 'c3' });
        const appended = [...a.positions, ...b.positions, ...c.positions];
        expect(appended.length).toBe(4);
        expectIncreasing(appended);
        expect(appended[0]).toBeGreaterThan(ORIGIN);
        expect(a.duplicate || b.duplicate || c.duplicate).toBe(false);
        const all = await collect(log.read());
        expect(all.map((e) => e.position)).toEqual(appended);
        expect(all.map((e) => e.stream)).toEqual(['conductor', 'conductor', 'judge/0', 'conductor']);
        expect(all.map((e) => e.commitId)).toEqual(['c1', 'c1', 'c2', 'c3']);
        const head = await log.head();
        expect(comparePositions(head, appended[3]!), 'head is at or after the last event').not.toBeLessThan(0);
        expect(await collect(log.read({ after: head }))).toEqual([]);
        expect(await log.streamHead('conductor')).toBe(appended[3]);
        expect(await log.streamHead('judge/0')).toBe(appended[2]);
        expect(await log.streamHead('nobody')).toBe(ORIGIN);
        // A later append sorts after the head seen before it.
        const d = await log.append('judge/0', [failed('y')], { commitId: 'c4' });
        expect(comparePositions(d.positions[0]!, head)).toBeGreaterThan(0);
      });

      it('stores the envelope: derived or given ids, causation, correlation, version, data', async () => {
        const log = await open();
        const given: NewEvent = { ...round(7), id: 'evt-given', causationId: 'cause-1', correlationId: 'corr-1', at: '2024-01-02T03:04:05.000Z' };
        await log.append('conductor', [round(6), given], { commitId: 'commit-x' });
        const [first, second] = await collect(log.read());
        expect(first!.id).toBe(deriveEventId('commit-x', 0));
        expect(first!.causationId).toBeNull();
        expect(first!.correlationId).toBeNull();
        expect(first!.v).toBe(1);
        expect(first!.runId).toBe(RUN);
        expect(Number.isNaN(Date.parse(first!.at))).toBe(false);
        expect(second).toMatchObject({
          id: 'evt-given',
          type: 'RoundStarted',
          causationId: 'cause-1',
          correlationId: 'corr-1',
          at: '2024-01-02T03:04:05.000Z',
          data: { round: 7, problemIds: ['p7'] },
        });
      });

      it('reads long logs completely, in order, across pages', async () => {
        const log = await open();
        const n = 2600;
        // Many commits too: a backend may read a few commits one way and many another.
        for (let c = 0; c < n / 20; c++) {
          await log.append(
            `s/${c % 3}`,
            Array.from({ length: 20 }, (_, i) => round(c * 20 + i)),
            { commitId: `big-${c}` },
          );
        }
        const all = await collect(log.read());
        expect(all.length).toBe(n);
        expectIncreasing(all.map((e) => e.position));
        all.forEach((e, i) => expect((e.data as { round: number }).round).toBe(i));
        const limited = await collect(log.read({ after: all[999]!.position, limit: 1500 }));
        expect(limited.map((e) => e.position)).toEqual(all.slice(1000, 2500).map((e) => e.position));
      });
    });

    describe('read filters and ranges', () => {
      /** Seven events; `p[k]` is the position of the k-th (1-based, p[0] = ORIGIN). */
      async function seeded(): Promise<{ log: EventLog; p: Position[] }> {
        const log = await open();
        const p: Position[] = [ORIGIN];
        p.push(...(await log.append('conductor', [round(0), failed('a')], { commitId: 'f1' })).positions); // 1, 2
        p.push(...(await log.append('judge/0', [round(1, 'other-run')], { commitId: 'f2' })).positions); // 3
        p.push(...(await log.append('judge/1', [failed('b')], { commitId: 'f3' })).positions); // 4
        p.push(...(await log.append('judgement', [round(2)], { commitId: 'f4' })).positions); // 5
        p.push(...(await log.append('solver/0', [failed('c', 'other-run'), round(3)], { commitId: 'f5' })).positions); // 6, 7
        return { log, p };
      }
      /** Which of the seven events a read returns, by their 1-based rank. */
      const ranks = async (s: { log: EventLog; p: Position[] }, range?: ReadRange, filter?: ReadFilter) =>
        (await collect(s.log.read(range, filter))).map((e) => s.p.indexOf(e.position));

      it('filters by type, stream, stream prefix and run, alone and together', async () => {
        const s = await seeded();
        expect(await ranks(s, {}, { types: ['RunFailed'] })).toEqual([2, 4, 6]);
        expect(await ranks(s, {}, { types: ['RunFailed', 'RoundStarted'] })).toEqual([1, 2, 3, 4, 5, 6, 7]);
        expect(await ranks(s, {}, { types: [] })).toEqual([]);
        expect(await ranks(s, {}, { streams: ['judge/1', 'conductor'] })).toEqual([1, 2, 4]);
        expect(await ranks(s, {}, { streamPrefix: 'judge/' })).toEqual([3, 4]);
        expect(await ranks(s, {}, { runId: 'other-run' })).toEqual([3, 6]);
        expect(await ranks(s, {}, { runId: RUN, types: ['RoundStarted'], streamPrefix: 'judge' })).toEqual([5]);
      });

      it('reads ranges: strictly after, to ("as of"), limit', async () => {
        const s = await seeded();
        const { p } = s;
        expect(await ranks(s, { after: p[2] })).toEqual([3, 4, 5, 6, 7]);
        expect(await ranks(s, { after: p[1], to: p[4] })).toEqual([2, 3, 4]);
        expect(await ranks(s, { after: p[1], limit: 2 })).toEqual([2, 3]);
        expect(await ranks(s, { to: p[5] }, { types: ['RunFailed'] })).toEqual([2, 4]);
        expect(await ranks(s, { after: p[7] })).toEqual([]);
        expect(await ranks(s, { after: await s.log.head() })).toEqual([]);
        expect(await ranks(s, { to: ORIGIN })).toEqual([]);
        // Reading after a position inside a commit starts at the next event of that commit.
        expect(await ranks(s, { after: p[6] })).toEqual([7]);
      });

      it('reads events at given positions, in the order asked, as a read gives them; none where no event is', async () => {
        const s = await seeded();
        const { log, p } = s;
        const all = await collect(log.read());
        const byPosition = new Map(all.map((e) => [e.position as number, e]));
        // Out of order, repeated, inside commits and not next to each other, the head and past it.
        const asked = [p[6], p[1], p[7], p[4], p[1], p[5]].map((x) => x as Position);
        const native = readAtOf(log);
        const fallback = readAtOf({ read: (range, filter) => log.read(range, filter), head: () => log.head() } as EventLog);
        for (const readAt of [native, fallback]) {
          expect(await readAt(asked)).toEqual(asked.map((x) => byPosition.get(x)));
          const head = await log.head();
          const missing = await readAt([head + 1, ...(byPosition.has(head) ? [] : [head])].map((x) => x as Position));
          expect(missing.every((e) => e === undefined)).toBe(true);
          expect(await readAt([])).toEqual([]);
        }
      });

      it('an "as of" read returns the same events after later appends', async () => {
        const { log } = await seeded();
        const asOf = await log.head();
        const before = await collect(log.read({ to: asOf }));
        await log.append('conductor', [round(9), failed('later')], { commitId: 'later' });
        const after = await collect(log.read({ to: asOf }));
        expect(after).toEqual(before);
        expect((await collect(log.read())).length).toBe(before.length + 2);
        expect((await collect(log.read({ after: asOf }))).map((e) => e.commitId)).toEqual(['later', 'later']);
      });

      it('refuses bad ranges and filters with a named argument', async () => {
        const { log } = await seeded();
        const err = await catchError(collect(log.read({ after: -1 as Position })));
        expect(err).toBeInstanceOf(InvalidLogArgumentError);
        expect(String(err)).toContain('range.after');
        const old = await catchError(collect(log.read({ from: 1 } as ReadRange)));
        expect(old).toBeInstanceOf(InvalidLogArgumentError);
        const err2 = await catchError(collect(log.read({}, { types: [''] })));
        expect(err2).toBeInstanceOf(InvalidLogArgumentError);
        expect(String(err2)).toContain('filter.types');
      });
    });

    describe('optimistic concurrency', () => {
      it('expected ORIGIN means "no event yet" on that stream', async () => {
        const log = await open();
        const first = await log.append('problem/p1', [round(0)], { commitId: 'a', expectedPosition: ORIGIN });
        const err = await catchError(log.append('problem/p1', [round(1)], { commitId: 'b', expectedPosition: ORIGIN }));
        expect(err).toBeInstanceOf(ConcurrencyError);
        expect(err).toMatchObject({ stream: 'problem/p1', expected: ORIGIN, actual: first.positions[0] });
        // Another stream is still empty, whatever the global head.
        const other = await log.append('problem/p2', [round(2)], { commitId: 'c', expectedPosition: ORIGIN });
        expect(comparePositions(other.positions[0]!, first.positions[0]!)).toBeGreaterThan(0);
      });

      it('checks the stream, not the global head', async () => {
        const log = await open();
        const a1 = await log.append('a', [round(0)], { commitId: '1', expectedPosition: ORIGIN });
        const b1 = await log.append('b', [round(1)], { commitId: '2' });
        const a2 = await log.append('a', [round(2)], { commitId: '3', expectedPosition: a1.positions[0] });
        const stale = await catchError(log.append('a', [round(3)], { commitId: '4', expectedPosition: b1.positions[0] }));
        expect(stale).toMatchObject({ name: 'ConcurrencyError', stream: 'a', expected: b1.positions[0], actual: a2.positions[0] });
        expect(await log.streamHead('a')).toBe(a2.positions[0]);
        expect((await collect(log.read())).length).toBe(3);
      });

      it('the last position of a multi-event commit is the stream head to expect', async () => {
        const log = await open();
        const r = await log.append('m', [round(0), round(1), round(2)], { commitId: 'm1', expectedPosition: ORIGIN });
        expect(await log.streamHead('m')).toBe(r.positions[2]);
        await log.append('m', [round(3)], { commitId: 'm2', expectedPosition: r.positions[2] });
        expect((await collect(log.read())).length).toBe(4);
      });

      it('two writers racing on one stream: exactly one wins, the loser writes nothing', async () => {
        const one = await open();
        const two = await open();
        await one.append('judge/0', [round(0)], { commitId: 'seed' });
        const seen = await two.streamHead('judge/0');
        const results = await Promise.allSettled([
          one.append('judge/0', [round(1), round(2)], { commitId: 'w1', expectedPosition: seen }),
          two.append('judge/0', [failed('w2'), failed('w2b')], { commitId: 'w2', expectedPosition: seen }),
        ]);
        const ok = results.filter((r) => r.status === 'fulfilled');
        const bad = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
        expect(ok.length).toBe(1);
        expect(bad.length).toBe(1);
        expect(bad[0]!.reason).toBeInstanceOf(ConcurrencyError);
        const all = await collect(one.read());
        expect(all.length).toBe(3);
        expect(new Set(all.slice(1).map((e) => e.commitId)).size).toBe(1);
      });
    });

    describe('idempotent commits', () => {
      it('the same commitId twice stores one copy and says duplicate', async () => {
        const log = await open();
        const first = await log.append('solver/0', [round(0), round(1)], { commitId: 'same', expectedPosition: ORIGIN });
        await log.append('solver/1', [failed('between')], { commitId: 'other' });
        // A retry after a lost reply: its expected position is stale now, yet it is a duplicate, not a conflict.
        const again = await log.append('solver/0', [round(0), round(1)], { commitId: 'same', expectedPosition: ORIGIN });
        expect(again).toEqual({ positions: first.positions, duplicate: true });
        expect((await collect(log.read())).length).toBe(3);
      });

      it('states its dedup window, and a duplicate inside it is a success', async () => {
        const log = await open();
        expect(log.capabilities.dedupWindowMs).toBeGreaterThan(0);
        const a = await log.append('x', [round(0)], { commitId: 'dup' });
        const results = await Promise.all([1, 2, 3].map(() => log.append('x', [round(0)], { commitId: 'dup' })));
        for (const r of results) expect(r).toEqual({ positions: a.positions, duplicate: true });
        expect((await collect(log.read())).length).toBe(1);
      });

      it('remembers commits across handles and reopening', async () => {
        const log = await open();
        const first = await log.append('solver/0', [round(0)], { commitId: 'persist' });
        await log.close();
        const reopened = await open();
        const again = await reopened.append('solver/0', [round(0)], { commitId: 'persist' });
        expect(again).toEqual({ positions: first.positions, duplicate: true });
        expect((await collect(reopened.read())).length).toBe(1);
      });
    });

    describe('all-or-nothing commits', () => {
      it('one malformed event writes nothing and names its index and field', async () => {
        const log = await open();
        await log.append('s', [round(0)], { commitId: 'ok' });
        const headBefore = await log.head();
        const bad = { type: 'RoundStarted', runId: RUN, data: { round: 'one', problemIds: [] } } as NewEvent;
        const err = await catchError(log.append('s', [round(1), bad, round(2)], { commitId: 'bad' }));
        expect(err).toBeInstanceOf(MalformedEventError);
        expect(err).toMatchObject({ location: { index: 1, commitId: 'bad' }, type: 'RoundStarted' });
        expect((err as MalformedEventError).issues.map((i) => i.path)).toEqual(['data.round']);
        expect(await log.head()).toBe(headBefore);
        // The commit id was not consumed: the fixed batch goes through under it.
        const fixed = await log.append('s', [round(1), round(2)], { commitId: 'bad' });
        expect(fixed.duplicate).toBe(false);
        expect((await collect(log.read({ after: headBefore }))).map((e) => e.position)).toEqual(fixed.positions);
      });

      it('refuses unknown types, bad envelopes, empty commits and reused ids, writing nothing', async () => {
        const log = await open();
        const c0 = await log.append('s', [{ ...round(0), id: 'taken' }], { commitId: 'c0' });
        const unknown = await catchError(log.append('s', [round(1), { type: 'NoSuchEvent', runId: RUN, data: {} }], { commitId: 'c1' }));
        expect(unknown).toBeInstanceOf(UnknownEventTypeError);
        expect(unknown).toMatchObject({ type: 'NoSuchEvent', location: { index: 1 } });
        const noRun = await catchError(log.append('s', [{ type: 'RunFailed', data: { reason: 'x' } } as unknown as NewEvent], { commitId: 'c2' }));
        expect(noRun).toBeInstanceOf(MalformedEventError);
        expect((noRun as MalformedEventError).issues[0]!.path).toBe('runId');
        expect(await catchError(log.append('s', [], { commitId: 'c3' }))).toBeInstanceOf(EmptyCommitError);
        if (log.capabilities.refusesReusedEventIds) {
          const reused = await catchError(log.append('s', [round(1), { ...round(2), id: 'taken' }], { commitId: 'c4' }));
          expect(reused).toBeInstanceOf(DuplicateEventIdError);
        }
        const twice = await catchError(
          log.append(
            's',
            [
              { ...round(1), id: 'x' },
              { ...round(2), id: 'x' },
            ],
            { commitId: 'c5' },
          ),
        );
        expect(twice).toBeInstanceOf(DuplicateEventIdError);
        expect(await catchError(log.append('', [round(1)], { commitId: 'c6' }))).toBeInstanceOf(InvalidLogArgumentError);
        expect((await collect(log.read())).length).toBe(1);
        expect(await log.streamHead('s')).toBe(c0.positions[0]);
      });

      it('refuses a commit over the size limit before writing anything, naming commit, size and limit', async () => {
        const log = await open();
        const limit = log.capabilities.maxCommitBytes;
        const big = failed('x'.repeat(limit));
        const err = await catchError(log.append('s', [round(0), big], { commitId: 'huge' }));
        expect(err).toBeInstanceOf(CommitTooLargeError);
        expect(err).toMatchObject({ commitId: 'huge', limit, unit: 'bytes' });
        expect(String(err)).toMatch(/blob store/);
        expect((await collect(log.read())).length).toBe(0);
        // Just under the limit goes through.
        const fits = failed('y'.repeat(Math.floor(limit / 2)));
        expect((await log.append('s', [fits], { commitId: 'fits' })).duplicate).toBe(false);
      });
    });

    describe('subscriptions', () => {
      it('signals caught-up on an empty log, then tails live appends', async () => {
        const log = await open();
        const sub = log.subscribe();
        const it = sub[Symbol.asyncIterator]();
        expect((await it.next()).value).toEqual({ kind: 'caught-up', position: ORIGIN });
        const next = it.next();
        const r = await log.append('s', [round(0)], { commitId: 'live' });
        const item = (await next).value as SubscriptionItem;
        expect(item.kind === 'event' && item.event.position).toBe(r.positions[0]);
        const caught = (await it.next()).value as SubscriptionItem;
        expect(caught.kind).toBe('caught-up');
        expect(caught.kind === 'caught-up' && caught.position >= r.positions[0]!).toBe(true);
        await sub.close();
        expect((await it.next()).done).toBe(true);
      });

      it('delivers stored events, caught-up, then live ones; close ends the iteration', async () => {
        const log = await open();
        const a = await log.append('s', [round(0), round(1)], { commitId: 'a' });
        const headA = await log.head();
        let b: Position | undefined;
        const sub = log.subscribe();
        const items: SubscriptionItem[] = [];
        for await (const item of sub) {
          items.push(item);
          if (item.kind === 'caught-up' && b === undefined) {
            b = (await log.append('s', [round(2)], { commitId: 'b' })).positions[0]!;
          } else if (item.kind === 'caught-up') await sub.close();
        }
        const headB = await log.head();
        expect(items.map((i) => (i.kind === 'event' ? i.event.position : `caught-up@${i.position}`))).toEqual([
          a.positions[0],
          a.positions[1],
          `caught-up@${headA}`,
          b,
          `caught-up@${headB}`,
        ]);
      });

      it('resumes from a checkpoint without loss or duplicates while appends go on', async () => {
        const writer = await open();
        const reader = await open();
        const total = 400;
        const writing = (async () => {
          for (let c = 0; c < total / 10; c++) {
            await writer.append(
              `w/${c % 4}`,
              Array.from({ length: 10 }, (_, i) => round(c * 10 + i)),
              { commitId: `w-${c}` },
            );
            if (c % 5 === 0) await new Promise((r) => setTimeout(r, 1));
          }
        })();
        const seen: Position[] = [];
        let checkpoint = ORIGIN;
        // Consume in several sessions, each stopping at an arbitrary point and resuming from its checkpoint.
        for (let session = 0; seen.length < total; session++) {
          const items = await drain(reader, { after: checkpoint }, (got) => {
            const n = eventsOf(got).length;
            return n >= 37 + session * 11 || seen.length + n >= total;
          });
          for (const e of eventsOf(items)) seen.push(e.position);
          checkpoint = seen[seen.length - 1] ?? checkpoint;
          if (session > 100) throw new Error('subscription made no progress');
        }
        await writing;
        expect(seen).toEqual((await collect(writer.read())).map((e) => e.position));
        expect(seen.length).toBe(total);
      });

      it('filters, and reports caught-up at the head scanned even past the last match', async () => {
        const log = await open();
        const one = await log.append('judge/0', [failed('a')], { commitId: '1' });
        const two = await log.append('solver/0', [round(0), round(1)], { commitId: '2' });
        const head = await log.head();
        expect(comparePositions(head, two.positions[1]!), 'head is at or after the last event').not.toBeLessThan(0);
        const items = await drain(log, { filter: { streamPrefix: 'judge/' } }, (got) => got.some((i) => i.kind === 'caught-up'));
        expect(items.map((i) => (i.kind === 'event' ? i.event.position : `caught-up@${i.position}`))).toEqual([one.positions[0], `caught-up@${head}`]);
        const after = await drain(log, { after: one.positions[0], filter: { types: ['RoundStarted'] } }, (got) => got.some((i) => i.kind === 'caught-up'));
        expect(eventsOf(after).map((e) => e.position)).toEqual(two.positions);
      });

      it('sees appends made through another handle', async () => {
        const reader = await open();
        const writer = await open();
        const sub = reader.subscribe();
        const it = sub[Symbol.asyncIterator]();
        expect((await it.next()).value).toMatchObject({ kind: 'caught-up', position: ORIGIN });
        const next = it.next();
        await writer.append('elsewhere', [failed('from the other handle')], { commitId: 'x' });
        const item = (await next).value as SubscriptionItem;
        expect(item.kind === 'event' && item.event.data).toEqual({ reason: 'from the other handle' });
        await sub.close();
      });
    });

    describe('blobs', () => {
      it('puts, gets and checks content by sha256; same content, same hash', async () => {
        const log = await open();
        const text = 'def f(x):\n    return x + 1\n';
        const h1 = await log.blobs.put(text);
        expect(h1).toBe(HASH(text));
        expect(await log.blobs.put(new TextEncoder().encode(text))).toBe(h1);
        expect(await log.blobs.getText(h1)).toBe(text);
        const bytes = new Uint8Array([0, 255, 1, 254]);
        const h2 = await log.blobs.put(bytes);
        expect(Array.from(await log.blobs.get(h2))).toEqual([0, 255, 1, 254]);
        expect(await log.blobs.has(h2)).toBe(true);
        const missing = HASH('never stored');
        expect(await log.blobs.has(missing)).toBe(false);
        const err = await catchError(log.blobs.get(missing));
        expect(err).toBeInstanceOf(BlobNotFoundError);
        expect(err).toMatchObject({ hash: missing });
        expect(await catchError(log.blobs.get('not-a-hash'))).toBeInstanceOf(InvalidBlobHashError);
        const listed: string[] = [];
        for await (const h of log.blobs.list()) listed.push(h);
        expect(listed.sort()).toEqual([h1, h2].sort());
        await log.close();
        const reopened = await open();
        expect(await reopened.blobs.getText(h1)).toBe(text);
      });
    });

    describe('schema evolution on read', () => {
      it('reads an event stored at v1 as v2 (SolutionSampled gains sampling.temperature = null)', async () => {
        const old = await open({ registry: solutionV1Registry });
        const v1 = {
          round: 0,
          problemId: 'p1',
          solutionId: 's1',
          programHash: HASH('prog'),
          policy: { role: 'code', name: 'toy', version: 0 },
          sampling: { seed: 7, index: 0, candidateId: null },
          responseHash: null,
        };
        await old.append('solver/0', [{ type: 'SolutionSampled', runId: RUN, data: v1 }], { commitId: 'v1' });
        await old.close();
        const current = await open();
        const [e] = await collect(current.read());
        expect(e!.v).toBe(2);
        // toMatchObject: the current schema may have gained more defaulted fields since.
        expect(e!.data).toMatchObject({ ...v1, sampling: { seed: 7, index: 0, temperature: null, candidateId: null } });
        expect((e!.data as { sampling: Record<string, unknown> }).sampling).toHaveProperty('temperature', null);
        const items = await drain(current, {}, (got) => got.some((i) => i.kind === 'caught-up'));
        expect(eventsOf(items)[0]!.data).toEqual(e!.data);
      });

      it('reports unknown types, newer versions and malformed stored data with their position', async () => {
        const writerRegistry = catalog.extend({
          FutureThing: defineEvent({ version: 1, schema: z.strictObject({ x: z.int() }) }),
          RoundCompleted: defineEvent({ version: 3, schema: z.strictObject({ round: z.int(), note: z.string() }) }),
          RunFailed: defineEvent({ version: 1, schema: z.strictObject({ reason: z.int() }) }),
        });
        const writer = await open({ registry: writerRegistry });
        const [p1] = (await writer.append('s', [round(0)], { commitId: 'a' })).positions;
        const [p2] = (await writer.append('s', [{ type: 'FutureThing', runId: RUN, data: { x: 1 } }], { commitId: 'b' })).positions;
        const [p3] = (await writer.append('s', [{ type: 'RoundCompleted', runId: RUN, data: { round: 1, note: 'n' } }], { commitId: 'c' })).positions;
        const [p4] = (await writer.append('s', [{ type: 'RunFailed', runId: RUN, data: { reason: 42 } }], { commitId: 'd' })).positions;
        await writer.close();
        const reader = await open();
        expect((await collect(reader.read({ to: p1 }))).length).toBe(1);
        const unknown = await catchError(collect(reader.read({ after: p1 })));
        expect(unknown).toBeInstanceOf(UnknownEventTypeError);
        expect(unknown).toMatchObject({ type: 'FutureThing', version: 1, position: p2 });
        const newer = await catchError(collect(reader.read({ after: p2, to: p3 })));
        expect(newer).toBeInstanceOf(UnsupportedEventVersionError);
        expect(newer).toMatchObject({ type: 'RoundCompleted', version: 3, currentVersion: 1, position: p3 });
        const malformed = await catchError(collect(reader.read({ after: p3 })));
        expect(malformed).toBeInstanceOf(MalformedEventError);
        expect(malformed).toMatchObject({ type: 'RunFailed', version: 1, position: p4 });
        expect((malformed as MalformedEventError).issues.map((i) => i.path)).toEqual(['data.reason']);
        expect(String(malformed)).toContain(`position ${p4}`);
        // A subscription stops with the same error rather than skipping the event.
        const subErr = await catchError(drain(reader, { after: p3 }, () => false));
        expect(subErr).toBeInstanceOf(MalformedEventError);
      });
    });

    describe('lifecycle', () => {
      it('keeps events across reopening and continues the positions', async () => {
        const log = await open();
        const a = await log.append('s', [round(0), round(1)], { commitId: 'a' });
        const head = await log.head();
        await log.close();
        expect(await catchError(log.head())).toBeInstanceOf(LogClosedError);
        const again = await open();
        expect(await again.head()).toBe(head);
        const b = await again.append('s', [round(2)], { commitId: 'b', expectedPosition: a.positions[1] });
        expect(comparePositions(b.positions[0]!, head)).toBeGreaterThan(0);
        expect((await collect(again.read())).map((e) => (e.data as { round: number }).round)).toEqual([0, 1, 2]);
      });
    });
  });
}
