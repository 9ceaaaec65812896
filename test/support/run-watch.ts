/**
 * Watching a run of worker processes on the machines of `startMachines` while faults are made:
 * waiting for the log's replicas to catch up, and what the cluster says of a run that stalls.
 */
import { readFileSync } from 'node:fs';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import type { StreamInfo } from '@nats-io/jetstream';
import type { JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { runStatus } from '../../src/workers/status.js';
import type { Machines } from './machines.js';
import { until } from './until.js';

/** Waits until every replica of the run's log stream is current (a healed or restarted server
 * caught up); with `every`, of every stream on the cluster too (the task queues', the worker
 * board's: each its own raft group, catching up on its own). */
export async function replicasCurrent(m: Machines, runId: string, opts: { every?: boolean } = {}): Promise<void> {
  const log = (await openRunLog(m.servers(), runId, { create: false, credsFile: m.creds('admin') })) as JetStreamEventLog;
  const current = (info: StreamInfo) => (info.cluster?.replicas ?? []).every((r) => r.current && (r.lag ?? 0) === 0 && !r.offline);
  try {
    await until("every replica of the run's log to be current", 60_000, async () => {
      const info = await log.jsm.streams.info(runStreamNames(runId).stream);
      return (info.cluster?.replicas ?? []).length === 2 && current(info);
    });
    if (opts.every)
      await until('every replica of every stream to be current', 60_000, async () => {
        const names = await log.jsm.streams.names().next();
        const infos = await Promise.all(names.map((n) => log.jsm.streams.info(n)));
        return infos.every(current);
      });
  } finally {
    await log.close();
  }
}

/** What the cluster says of the run when it stalls: every worker's figures (how far it folded,
 * what it runs), the queues' depths, and the leader and replicas of the log's streams. */
export async function clusterReport(m: Machines, runId: string): Promise<string> {
  const workers: string[] = [];
  const streams: string[] = [];
  const failed = (into: string[]) => (err: unknown) => {
    into.push(`(the cluster did not answer: ${(err as Error).message})`);
  };
  // Each part on its own: one that hangs does not hide the other.
  const status = (async () => {
    const s = await runStatus(m.servers(), runId, { credsFile: m.creds('admin') });
    workers.push(`head ${s.head}, completed ${s.completed}, queues ${JSON.stringify(s.queues)}, leases ${JSON.stringify(s.leases)}`);
    for (const w of s.workers)
      workers.push(
        `  ${w.role} pid ${w.pid} ${w.state}${w.gone ? ' GONE' : ''}: folded ${w.folded} (lag ${w.lag}), running ${w.running}, pending ${w.pending}, done ${w.done}`,
      );
  })().catch(failed(workers));
  const cluster = (async () => {
    const log = (await openRunLog(m.servers(), runId, { create: false, credsFile: m.creds('admin') })) as JetStreamEventLog;
    try {
      for (const name of await log.jsm.streams.names().next()) {
        const info = await log.jsm.streams.info(name);
        const c = info.cluster;
        streams.push(
          `  stream ${name}: last_seq ${info.state.last_seq}, msgs ${info.state.messages}, leader ${c?.leader ?? '-'}, replicas ${JSON.stringify(c?.replicas ?? [])}`,
        );
      }
      for (const queue of ['programs', 'solutions', 'suites']) {
        for (const ci of await log.jsm.consumers
          .list(`${runStreamNames(runId).stream}_TASKS_${queue}`)
          .next()
          .catch(() => [])) {
          streams.push(
            `  consumer ${ci.name}: pending ${ci.num_pending}, ack pending ${ci.num_ack_pending}, redelivered ${ci.num_redelivered}, waiting ${ci.num_waiting}, leader ${ci.cluster?.leader ?? '-'}`,
          );
        }
      }
    } finally {
      await log.close();
    }
  })().catch(failed(streams));
  // A cluster that does not answer must not keep the report past the test's own timeout.
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      streams.push('(no more answers within 20 s)');
      resolve();
    }, 20_000);
  });
  await Promise.race([Promise.all([status, cluster]), late]).finally(() => clearTimeout(timer));
  return [...workers, ...streams].join('\n');
}

/** Rejects after `ms` with the faults made, what the cluster says of the run and the last lines
 * the workers wrote: a run that stalls then says where, where the test's own timeout would say
 * nothing. */
export function stallReport(
  m: Machines,
  ms: number,
  runId: string,
  workersLog: string,
  faults: readonly string[],
): { report: Promise<never>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const report = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      let tail = '(no workers.log)';
      try {
        tail = readFileSync(workersLog, 'utf8').trimEnd().split('\n').slice(-60).join('\n');
      } catch {
        // The supervisor had not started.
      }
      void clusterReport(m, runId).then((cluster) =>
        reject(
          new Error(
            `the run did not finish in ${ms / 1000} s; faults made: ${faults.join(', ') || 'none'}; the cluster says:\n${cluster}\nlast lines of workers.log:\n${tail}`,
          ),
        ),
      );
    }, ms);
  });
  return { report, cancel: () => clearTimeout(timer) };
}
