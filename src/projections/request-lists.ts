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

/** The lists' text (pure: the same data, the same text): JSON.stringify of a StoredRequest with
 * its keys in a fixed order, so the text does not depend on the event data's. Written out here
 * (a replay makes one per request, tens of kilobytes each): hashes are lowercase hex (the
 * event's schema), so they are joined without escaping; ids go through JSON.stringify. */
export function requestListsText(d: Requested): string {
  const np = d.programs.length;
  const nt = d.tests.length;
  const programIds = new Array<string>(np);
  const programHashes = new Array<string>(np);
  const testIds = new Array<string>(nt);
  const testHashes = new Array<string>(nt);
  for (let i = 0; i < np; i++) {
    const p = d.programs[i]!;
    programIds[i] = p.programId;
    programHashes[i] = p.programHash;
  }
  for (let i = 0; i < nt; i++) {
    const t = d.tests[i]!;
    testIds[i] = t.testId;
    testHashes[i] = t.testHash;
  }
  // Reused pairs are looked up for collected requests only (the reducer's verdictsOf).
  const reused = collectedPurpose(d.purpose) ? d.reused : [];
  return `{"programIds":${JSON.stringify(programIds)},"programHashes":${hexList(programHashes)},"testIds":${JSON.stringify(testIds)},"testHashes":${hexList(testHashes)},"pairs":[${d.pairs.join(',')}],"reused":[${reused.join(',')}]}`;
}

const hexList = (hashes: readonly string[]) => (hashes.length === 0 ? '[]' : `["${hashes.join('","')}"]`);
