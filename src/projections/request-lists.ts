/**
 * An ExecutionRequested's lists as the read models keep them: programs' and tests' ids and
 * hashes as four parallel lists (no object or tuple per item, so the text is one native
 * JSON.stringify over the event's own strings),
 * pairs (and, for the requests whose verdicts answer selection collects, reused pairs) as flat
 * index pairs, in a fixed key order so the text does not depend on the event data's.
 * Made once per event however many projections keep it: a reward request's lists are tens of
 * kilobytes of JSON.
 */
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

const made = new WeakMap<Requested, string>();

/** The lists' text (pure: the same data, the same text; kept per event object). */
export function requestListsText(d: Requested): string {
  let text = made.get(d);
  if (text === undefined) {
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
    made.set(d, (text = JSON.stringify(body)));
  }
  return text;
}
