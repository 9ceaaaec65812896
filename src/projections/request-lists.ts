/**
 * An ExecutionRequested's lists as the read models keep them, in execution_requests (the
 * executions read model's table, which answer selection reads too: stored once, since a reward
 * request's lists are tens of kilobytes): programs' and tests' ids and hashes as four parallel
 * lists (no object or tuple per item, so the text is one native JSON.stringify over the event's
 * own strings), pairs (and, for the requests whose verdicts answer selection collects, reused
 * pairs) as flat index pairs, in a fixed key order so the text does not depend on the event
 * data's. */
import type { EventData } from '../events/catalog.js';

type Requested = EventData<'ExecutionRequested'>;

/** The stored lists, parsed. */
export interface StoredRequest {
  programIds: string[];
  programHashes: string[];
  testIds: string[];
  testHashes: string[];
  pairs: number[];
  reused: number[];
}

/** Requests whose verdicts answer selection reads, reused pairs included. */
export const collectedPurpose = (purpose: string) => purpose === 'reward' || purpose === 'heldout';

/** The lists' text (pure: the same data, the same text). */
export function requestListsText(d: Requested): string {
  // Keys in a fixed order, so the text does not depend on the event data's.
  const body: StoredRequest = {
    programIds: d.programs.map((p) => p.programId),
    programHashes: d.programs.map((p) => p.programHash),
    testIds: d.tests.map((t) => t.testId),
    testHashes: d.tests.map((t) => t.testHash),
    pairs: d.pairs,
    // Reused pairs are looked up for collected requests only (the reducer's verdictsOf).
    reused: collectedPurpose(d.purpose) ? d.reused : [],
  };
  return JSON.stringify(body);
}
