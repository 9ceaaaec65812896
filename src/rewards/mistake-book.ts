/**
 * The Mistake Book as a pure reducer, so it is a projection of its own events.
 *
 * Per problem: testKey (normalized GT-corrected test text) -> { testHash, count, blacklisted }.
 * Code-A1 semantics (trainer_a1.py MistakeBook.update): each pass of a stored test by a valid
 * program -1 (applied first, on the book as it was), then each failure of a valid program on a
 * valid test +1; an entry is removed when its count reaches 0. By default only failures on
 * newly generated tests add and only passes of replayed tests subtract (the release's rule,
 * `sources: 'code-a1'`).
 * Order, as the release keeps it: a book is a list; every read (get_attack_testcases, once per
 * step for a scheduled problem, before its update) sorts it stably by count, highest first, and
 * keeps that order; an update changes counts in place, removes emptied entries and appends newly
 * failing tests in the order they first failed (program, then suite, then test). Replay = the
 * first 8 of the sorted list, so ties follow first-failure order and then the previous ranking.
 * crucible adds, all optional and all reported as changes: a size cap (evict lowest count),
 * decay (subtract `amount` in every round that is a positive multiple of `every`), and a working
 * blacklist (a test that made the reference fail, or was judged invalid later, is kept as a
 * tombstone with count 0 and is never counted or replayed again).
 * sandbox_error and not-run cells never count. Any other failing verdict (time_limit included)
 * is a failure: only the sandbox itself failing is special.
 *
 * Phases of one round, in order: (the read's sort), blacklist, pass, fail, decay, cap. Each
 * phase emits at most one change per key, in key order, except the fail phase, in first-failure
 * order (it decides where new tests are stored); the change list is deterministic either way.
 */
import { z } from 'zod';
import { VERDICTS } from '../core/verdicts.js';
import { RewardInputError, compareKeys, outcomeOf, parseWith } from './matrix.js';

export { normalizeTestKey } from './test-key.js';

export interface MistakeEntry {
  testKey: string;
  testHash: string;
  count: number;
  blacklisted: boolean;
}

/** One problem's book. Entries are kept in the release's stored order (see above: sorted by
 * count at the last read, then tests stored since, in first-failure order), which replay
 * ranking uses to break ties as the release does. The order follows from the previous book and
 * the changes alone, so a book folded from its events equals the live one. */
export interface MistakeBookState {
  readonly entries: readonly MistakeEntry[];
}

export function emptyMistakeBook(): MistakeBookState {
  return { entries: [] };
}

export type MistakeCause = 'fail' | 'pass' | 'decay' | 'cap' | 'blacklist';

/** One MistakeBookUpdated change. `count` is the count after it; 0 means the entry is gone
 * (or, for cause 'blacklist', is a tombstone). */
export interface MistakeBookChange {
  testKey: string;
  testHash: string;
  delta: number;
  count: number;
  cause: MistakeCause;
}

export const MistakeBookOptions = z
  .object({
    /** Most non-blacklisted entries per problem; null = no cap (Code-A1). */
    cap: z.number().int().positive().nullable().default(null),
    /** Subtract `amount` from every count in each round that is a positive multiple of `every`. */
    decay: z.object({ every: z.number().int().positive(), amount: z.number().int().positive() }).strict().nullable().default(null),
    /** Blacklist a test whose verdict on the reference program is a failure. */
    blacklistOnReferenceFail: z.boolean().default(true),
    /** 'any': every observation counts. 'code-a1': as the released code, only failures on newly
     * generated tests add and only passes of replayed tests subtract. */
    sources: z.enum(['any', 'code-a1']).default('code-a1'),
  })
  .strict();
export type MistakeBookOptions = z.output<typeof MistakeBookOptions>;
export type MistakeBookOptionsInput = z.input<typeof MistakeBookOptions>;

export const MistakeObservation = z.object({
  testKey: z.string().min(1),
  testHash: z.string().min(1),
  /** The program's module loaded (Code-A1 "valid program"). */
  programValid: z.boolean(),
  /** The test is usable (valid or GT-corrected). */
  testValid: z.boolean(),
  verdict: z.enum(VERDICTS).nullable(),
  /** The observation is the reference program's: it never counts, but a failure blacklists. */
  isReference: z.boolean().default(false),
  /** Whether the test was newly generated this round or replayed from the book. */
  origin: z.enum(['generated', 'replay']).default('generated'),
});
export type MistakeObservation = z.input<typeof MistakeObservation>;

export const MistakeRound = z.object({
  round: z.number().int().nonnegative(),
  observations: z.array(MistakeObservation),
  /** Tests judged invalid after they were stored: blacklisted. */
  invalidated: z.array(z.object({ testKey: z.string().min(1), testHash: z.string().min(1) })).default([]),
});
export type MistakeRound = z.input<typeof MistakeRound>;

export interface MistakeBookUpdate {
  state: MistakeBookState;
  changes: MistakeBookChange[];
}

/** The book as a read leaves it: sorted stably by count, highest first (tombstones, count 0,
 * last). Every update starts from it, as the release's update follows its read. */
function readOrder(entries: readonly MistakeEntry[]): MistakeEntry[] {
  return [...entries].sort((a, b) => b.count - a.count);
}

function toMap(book: MistakeBookState): Map<string, MistakeEntry> {
  const m = new Map<string, MistakeEntry>();
  for (const e of readOrder(book.entries)) {
    if (m.has(e.testKey)) throw new RewardInputError(`Mistake Book has testKey "${e.testKey}" twice`);
    m.set(e.testKey, { ...e });
  }
  return m;
}

function fromMap(m: Map<string, MistakeEntry>): MistakeBookState {
  return { entries: [...m.values()] };
}

function sortedKeys<T>(m: Map<string, T>): string[] {
  return [...m.keys()].sort(compareKeys);
}

/** Entries in replay order: count descending, ties in stored order (the sort is stable). */
function rankEntries(entries: Iterable<MistakeEntry>): MistakeEntry[] {
  return [...entries].filter((e) => !e.blacklisted).sort((a, b) => b.count - a.count);
}

/** Fold one judged problem-round into the book. Returns the new state and its changes. */
export function updateMistakeBook(book: MistakeBookState, round: MistakeRound, options: MistakeBookOptionsInput = {}): MistakeBookUpdate {
  const o = parseWith(MistakeBookOptions, options, 'Mistake Book options');
  const r = parseWith(MistakeRound, round, 'Mistake Book round');
  const entries = toMap(book);
  const changes: MistakeBookChange[] = [];

  // 1. Blacklist.
  const toBlacklist = new Map<string, string>();
  for (const inv of r.invalidated) toBlacklist.set(inv.testKey, inv.testHash);
  if (o.blacklistOnReferenceFail) {
    for (const ob of r.observations) {
      if (ob.isReference && outcomeOf(ob.verdict) === 'fail' && !toBlacklist.has(ob.testKey)) {
        toBlacklist.set(ob.testKey, ob.testHash);
      }
    }
  }
  for (const key of sortedKeys(toBlacklist)) {
    const prev = entries.get(key);
    if (prev?.blacklisted) continue;
    const testHash = prev?.testHash ?? (toBlacklist.get(key) as string);
    entries.set(key, { testKey: key, testHash, count: 0, blacklisted: true });
    // `0 - x`, not `-x`: a recorded delta is never negative zero.
    changes.push({ testKey: key, testHash, delta: 0 - (prev?.count ?? 0), count: 0, cause: 'blacklist' });
  }

  const counts = (pred: (ob: (typeof r.observations)[number]) => boolean): Map<string, number> => {
    const m = new Map<string, number>();
    for (const ob of r.observations) if (pred(ob)) m.set(ob.testKey, (m.get(ob.testKey) ?? 0) + 1);
    return m;
  };

  // 2. Passes of stored tests by valid programs.
  const passes = counts((ob) => !ob.isReference && ob.programValid && outcomeOf(ob.verdict) === 'pass' && (o.sources === 'any' || ob.origin === 'replay'));
  for (const key of sortedKeys(passes)) {
    const e = entries.get(key);
    if (e === undefined || e.blacklisted) continue;
    const next = Math.max(0, e.count - (passes.get(key) as number));
    changes.push({ testKey: key, testHash: e.testHash, delta: next - e.count, count: next, cause: 'pass' });
    if (next === 0) entries.delete(key);
    else e.count = next;
  }

  // 3. Failures of valid programs on valid tests.
  const fails = counts(
    (ob) => !ob.isReference && ob.programValid && ob.testValid && outcomeOf(ob.verdict) === 'fail' && (o.sources === 'any' || ob.origin === 'generated'),
  );
  const hashOf = new Map<string, string>();
  for (const ob of r.observations) if (!hashOf.has(ob.testKey)) hashOf.set(ob.testKey, ob.testHash);
  // In first-failure order (`fails` was filled in observation order): new tests are appended
  // to the book in this order.
  for (const key of fails.keys()) {
    const e = entries.get(key);
    if (e?.blacklisted) continue;
    const n = fails.get(key) as number;
    if (e === undefined) {
      const testHash = hashOf.get(key) as string;
      entries.set(key, { testKey: key, testHash, count: n, blacklisted: false });
      changes.push({ testKey: key, testHash, delta: n, count: n, cause: 'fail' });
    } else {
      e.count += n;
      changes.push({ testKey: key, testHash: e.testHash, delta: n, count: e.count, cause: 'fail' });
    }
  }

  // 4. Decay.
  if (o.decay !== null && r.round > 0 && r.round % o.decay.every === 0) {
    for (const key of sortedKeys(entries)) {
      const e = entries.get(key) as MistakeEntry;
      if (e.blacklisted) continue;
      const next = Math.max(0, e.count - o.decay.amount);
      changes.push({ testKey: key, testHash: e.testHash, delta: next - e.count, count: next, cause: 'decay' });
      if (next === 0) entries.delete(key);
      else e.count = next;
    }
  }

  // 5. Cap: keep the first `cap` in replay order.
  if (o.cap !== null) {
    const evicted = rankEntries(entries.values()).slice(o.cap);
    evicted.sort((a, b) => compareKeys(a.testKey, b.testKey));
    for (const e of evicted) {
      changes.push({ testKey: e.testKey, testHash: e.testHash, delta: 0 - e.count, count: 0, cause: 'cap' });
      entries.delete(e.testKey);
    }
  }

  return { state: fromMap(entries), changes };
}

/** Apply recorded changes (a MistakeBookUpdated event) to a book: the projection's reducer.
 * applyMistakeBookChanges(book, updateMistakeBook(book, r).changes) equals the update's state. */
export function applyMistakeBookChanges(book: MistakeBookState, changes: readonly MistakeBookChange[]): MistakeBookState {
  const entries = toMap(book);
  for (const c of changes) {
    if (c.cause === 'blacklist') {
      entries.set(c.testKey, { testKey: c.testKey, testHash: c.testHash, count: 0, blacklisted: true });
    } else if (c.count <= 0) {
      entries.delete(c.testKey);
    } else {
      entries.set(c.testKey, { testKey: c.testKey, testHash: c.testHash, count: c.count, blacklisted: false });
    }
  }
  return fromMap(entries);
}

export interface ReplayTest {
  testKey: string;
  testHash: string;
  count: number;
}

/** Books of several problems, by problem id. */
export type MistakeBooks = Readonly<Record<string, MistakeBookState>>;

/**
 * Tests to replay: the `k` highest counts (ties in stored order: see the file comment), blacklisted never.
 * Call with one problem's book, or with all books and a problem id.
 */
export function topTests(book: MistakeBookState, k?: number): ReplayTest[];
export function topTests(books: MistakeBooks, problemId: string, k?: number): ReplayTest[];
export function topTests(a: MistakeBookState | MistakeBooks, b?: number | string, c?: number): ReplayTest[] {
  let book: MistakeBookState;
  let k: number;
  if (typeof b === 'string') {
    book = Object.prototype.hasOwnProperty.call(a, b) ? (a as MistakeBooks)[b]! : emptyMistakeBook();
    k = c ?? 8;
  } else {
    book = a as MistakeBookState;
    k = b ?? 8;
  }
  if (!Number.isInteger(k) || k < 0) throw new RewardInputError(`k must be a non-negative integer, got ${String(k)}`);
  return rankEntries(book.entries)
    .slice(0, k)
    .map((e) => ({ testKey: e.testKey, testHash: e.testHash, count: e.count }));
}

export function isBlacklisted(book: MistakeBookState, testKey: string): boolean {
  return book.entries.some((e) => e.testKey === testKey && e.blacklisted);
}
