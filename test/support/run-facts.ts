/**
 * What a finished run recorded, for comparing a run of worker processes with the in-process
 * run of the same config and seed: the singleton roles' commits, and every (program, test)
 * pair of every execution request executed exactly once.
 */
import path from 'node:path';
import { LOG_FILE, runExperiment } from '../../src/actors/run.js';
import type { RunConfig } from '../../src/config/schema.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { runEvents } from './run-log.js';
import { requestSize, type EventData } from '../../src/events/catalog.js';
import { seqOf } from '../../src/events/positions.js';

/** Each event of the singleton roles as "commit type", sorted: equal lists mean no commit of
 * theirs lost or doubled. */
export const singletonCommits = (events: readonly EventEnvelope[]): string[] =>
  events
    .filter((e) => e.stream !== 'executor')
    .map((e) => `${e.commitId} ${e.type}`)
    .sort();

/** What the executors recorded: problems found (a pair executed twice or never, a program
 * recorded twice, an event or a commit stored twice) and how many programs were recorded. */
export function executionFacts(events: readonly EventEnvelope[]): { problems: string[]; programs: number; requests: number } {
  const problems: string[] = [];
  const requests = new Map<string, EventData<'ExecutionRequested'>>();
  const covered = new Map<string, number[]>();
  const programs = new Set<string>();
  const commitSeq = new Map<string, number>();
  const ids = new Set<string>();
  for (const e of events) {
    if (ids.has(e.id)) problems.push(`event ${e.id} twice`);
    ids.add(e.id);
    const seq = seqOf(e.position);
    if (commitSeq.has(e.commitId) && commitSeq.get(e.commitId) !== seq) problems.push(`commit ${e.commitId} stored twice`);
    commitSeq.set(e.commitId, seq);
    if (e.type === 'ExecutionRequested') {
      const d = e.data as EventData<'ExecutionRequested'>;
      requests.set(d.requestId, d);
      covered.set(d.requestId, new Array<number>(requestSize(d)).fill(0));
    }
    if (e.type === 'ProgramExecuted') {
      const d = e.data as EventData<'ProgramExecuted'>;
      const key = `${d.requestId} ${d.programHash}`;
      if (programs.has(key)) problems.push(`program recorded twice: ${key}`);
      programs.add(key);
      const counts = covered.get(d.requestId);
      if (!counts) problems.push(`results of unknown request ${d.requestId}`);
      else for (const at of d.pairs) counts[at] = (counts[at] ?? 0) + 1;
    }
  }
  for (const [id, counts] of covered) {
    counts.forEach((n, at) => {
      if (n !== 1) problems.push(`pair ${at} of ${id} executed ${n} times`);
    });
  }
  return { problems, programs: programs.size, requests: requests.size };
}

/** A round table without its wall times: what two runs of one config and seed share. */
export const tableFigures = (rows: readonly RoundRow[]) => rows.map(({ seconds: _s, ...r }) => r);

/** The in-process run of `config` in `dir` that a run of worker processes is compared with: its
 * table, its singleton roles' commits and its events. */
export async function inProcessReference(config: RunConfig, dir: string): Promise<{ rows: RoundRow[]; commits: string[]; events: EventEnvelope[] }> {
  const run = await runExperiment({ config, dir });
  if (!run.finished) throw new Error('the in-process reference run did not finish');
  const events = await runEvents(path.join(run.dir, LOG_FILE), run.runId);
  return { rows: run.rows, commits: singletonCommits(events), events };
}
