import type { Command } from 'commander';
import { DEFAULT_ACK_WAIT_MS, runWorker } from '../../workers/worker.js';
import { parseRole, SHARED_ROLES, WORKER_ROLES } from '../../workers/roles.js';
import { runStatus, type RunStatus } from '../../workers/status.js';
import { UserError } from '../errors.js';
import { formatTable } from '../table.js';
import { DEFAULT_SNAPSHOT_EVERY } from '../../actors/run.js';
import { MAX_JUDGE_SHARES } from '../../core/judge-shares.js';

const positiveInt = (flag: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UserError(`${flag} ${v}: expected a positive integer`);
  return n;
};

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description("run one role of a run as its own process over the run's JetStream log (stops when the run is complete)")
    .requiredOption('--role <role>', 'conductor, solver, adversary, executor, judge or learner')
    .requiredOption('--log <location>', "the run's log: nats://host:port")
    .requiredOption('--run <id>', 'the run id (printed by `crucible run`)')
    .option(
      '--concurrency <n>',
      "effects (programs, for executors) run at once; default 1 for singleton roles, 2 for solvers and adversaries, twice the sandbox's workers for executors",
      positiveInt('--concurrency'),
    )
    .option('--creds <file>', 'NATS credentials file')
    .option('--cache-dir <dir>', 'where built catalogs are cached (default <config dir>/.cache)')
    .option('--lease-ms <ms>', "a singleton's lease: a standby takes over this long after the live copy dies (default 6000)", positiveInt('--lease-ms'))
    .option(
      '--shares <k>',
      `judge only: the Judge split by problem among k live judges, every one started with the same k (default 1; at most ${MAX_JUDGE_SHARES})`,
      positiveInt('--shares'),
    )
    .option('--heartbeat-ms <ms>', 'heartbeat period on the worker board (default 2000)', positiveInt('--heartbeat-ms'))
    .option(
      '--snapshots <file>',
      "actor snapshots kept on this machine too (a run directory's snapshots.db); each is stored on the cluster, from where a worker on any machine starts",
    )
    .option('--snapshot-every <n>', "store the actor's state every n folded events (default 20000)", positiveInt('--snapshot-every'))
    .option(
      '--ping-ms <ms>',
      'ping the server this often; after 2 unanswered pings go on through another server of the cluster (default 2000)',
      positiveInt('--ping-ms'),
    )
    .option(
      '--ack-wait-ms <ms>',
      `a claimed task (a program, a sampling) not acked within this goes to another process of the role (default ${DEFAULT_ACK_WAIT_MS})`,
      positiveInt('--ack-wait-ms'),
    )
    .action(
      async (opts: {
        role: string;
        log: string;
        run: string;
        concurrency?: number;
        creds?: string;
        cacheDir?: string;
        leaseMs?: number;
        heartbeatMs?: number;
        shares?: number;
        ackWaitMs?: number;
        pingMs?: number;
        snapshots?: string;
        snapshotEvery?: number;
      }) => {
        const role = parseRole(opts.role);
        if (opts.shares !== undefined && role !== 'judge') throw new UserError(`--shares: only the judge splits in shares, not the ${role}`);
        if (opts.shares !== undefined && opts.shares > MAX_JUDGE_SHARES) throw new UserError(`--shares ${opts.shares}: at most ${MAX_JUDGE_SHARES}`);
        const stop = new AbortController();
        const onSignal = () => stop.abort();
        process.once('SIGTERM', onSignal);
        process.once('SIGINT', onSignal);
        try {
          const outcome = await runWorker({
            role,
            location: opts.log,
            runId: opts.run,
            ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
            ...(opts.creds !== undefined ? { credsFile: opts.creds } : {}),
            ...(opts.cacheDir !== undefined ? { cacheDir: opts.cacheDir } : {}),
            ...(opts.leaseMs !== undefined ? { leaseMs: opts.leaseMs } : {}),
            ...(opts.heartbeatMs !== undefined ? { heartbeatMs: opts.heartbeatMs } : {}),
            ...(opts.shares !== undefined ? { shares: opts.shares } : {}),
            ...(opts.ackWaitMs !== undefined ? { ackWaitMs: opts.ackWaitMs } : {}),
            ...(opts.pingMs !== undefined ? { ping: { intervalMs: opts.pingMs } } : {}),
            snapshots: { ...(opts.snapshots !== undefined ? { file: opts.snapshots } : {}), every: opts.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY },
            say: (line) => process.stderr.write(`crucible worker ${role} (pid ${process.pid}): ${line}\n`),
            signal: stop.signal,
          });
          const f = outcome.figures;
          process.stderr.write(
            `crucible worker ${role} (pid ${process.pid}): ${outcome.completed ? 'run complete' : 'stopped'}; ${f.written} commits written, ${f.duplicates} already there, ${f.fenced} fenced\n`,
          );
        } finally {
          process.off('SIGTERM', onSignal);
          process.off('SIGINT', onSignal);
        }
      },
    );

  program
    .command('status')
    .description('the live workers of a run on JetStream: roles, states, lag, queue depth, lease holders')
    .requiredOption('--log <location>', "the run's log: nats://host:port")
    .requiredOption('--run <id>', 'the run id')
    .option('--creds <file>', 'NATS credentials file')
    .option('--all', 'also list workers whose heartbeat stopped')
    .option('--json', 'print the status as one JSON object')
    .action(async (opts: { log: string; run: string; creds?: string; all?: boolean; json?: boolean }) => {
      const status = await runStatus(opts.log, opts.run, opts.creds !== undefined ? { credsFile: opts.creds } : {});
      process.stdout.write(opts.json ? `${JSON.stringify(status)}\n` : statusText(status, opts.all === true));
    });
}

export function statusText(s: RunStatus, all: boolean): string {
  const now = Date.now();
  const rows = s.workers.filter((w) => all || !w.gone);
  // What did not answer is shown as "?", never as empty, and listed with the reason.
  const shares = Object.keys(s.leases).filter((k) => k.includes('/'));
  const leases = WORKER_ROLES.filter((r) => !SHARED_ROLES.has(r))
    .map((role) => {
      const split = shares.filter((k) => k.startsWith(`${role}/`));
      // A role split in shares shows its shares' holders (its own lease is not used then).
      if (split.length > 0 && !s.leases[role]) return split.map((k) => `${k} ${s.leases[k]}`).join(', ');
      return `${role} ${role in s.leases ? (s.leases[role] ?? '-') : '?'}`;
    })
    .join(', ');
  return (
    `run ${s.runId}: ${s.completed ? 'complete' : 'running'}; log head ${s.head}\n` +
    `queues (waiting/claimed): ${Object.entries(s.queues)
      .map(([name, d]) => `${name} ${d ? `${d.waiting}/${d.claimed}` : '?'}`)
      .join(', ')}\n` +
    `leases: ${leases}\n` +
    (s.unreachable.length > 0 ? `could not reach: ${s.unreachable.join('; ')}\n` : '') +
    '\n' +
    formatTable(
      ['role', 'state', 'pid', 'host', 'lag', 'running', 'pending', 'commits', 'beat'],
      rows.map((w) => [
        w.role,
        w.gone ? 'gone' : w.state,
        String(w.pid),
        w.host,
        String(w.lag),
        String(w.running),
        String(w.pending),
        String(w.done),
        `${((now - w.at) / 1000).toFixed(1)}s ago`,
      ]),
    ) +
    '\n'
  );
}
