import type { Command } from 'commander';
import { NATS_ROLES, credentialsFile } from '../../events/jetstream/nats-roles.js';
import { featuresOf, serverNotices } from '../../events/jetstream/jetstream-log.js';
import { NatsServerError, natsDown, natsUp } from '../../nats-ops/nats-server.js';
import { superviseNats } from '../../nats-ops/nats-supervise.js';
import { UserError } from '../errors.js';

/** `nats up --supervise`: one timestamped line per thing it does; a signal stops the servers. */
async function supervise(dir: string): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  process.stdout.write(`${new Date().toISOString()} supervising (pid ${process.pid}): a server that dies is started again\n`);
  try {
    const ended = await superviseNats(dir, {
      signal: stop.signal,
      onEvent: (e) => {
        const what =
          e.kind === 'restarted'
            ? `${e.node} was not running: started again, pid ${e.pid}`
            : e.kind === 'restart-failed'
              ? `${e.node} was not running and did not start again: ${e.detail}`
              : 'nats down stopped the servers: supervision ends';
        process.stdout.write(`${e.at} ${what}\n`);
      },
    });
    if (ended === 'aborted') {
      const n = await natsDown(dir);
      process.stdout.write(`${new Date().toISOString()} signalled: stopped ${n} nats-server${n === 1 ? '' : 's'}\n`);
    }
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

export function registerNats(program: Command): void {
  const nats = program.command('nats').description('start and stop local nats-servers with JetStream (for a run log on JetStream)');
  nats
    .command('up')
    .description('start 1 server, or 3 with cluster routes (R3 streams), in the background; records their pids in DIR/nats.json')
    .requiredOption('--dir <dir>', 'where the servers keep their data, config and logs')
    .option('--nodes <n>', '1 or 3', '1')
    .option('--port <port>', 'client port of the first server (default: a free port)')
    .option('--no-auth', 'let any client in (default: a user per role, credentials written to DIR/<role>.creds.json)')
    .option('--tls', 'TLS for clients and cluster routes, with a CA made in DIR/tls (needs openssl)')
    .option('--supervise', 'stay in the foreground and start again any server that dies, until `nats down` (or SIGTERM/SIGINT, which stops the servers)')
    .action(async (opts: { dir: string; nodes: string; port?: string; auth: boolean; tls?: boolean; supervise?: boolean }) => {
      if (opts.nodes !== '1' && opts.nodes !== '3') throw new UserError(`--nodes ${opts.nodes}: expected 1 or 3`);
      if (opts.tls && !opts.auth) throw new UserError('--tls needs auth: clients get the CA in their credentials files (drop --no-auth)');
      const port = opts.port === undefined ? undefined : Number(opts.port);
      if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535)) throw new UserError(`--port ${opts.port}: expected a port number`);
      try {
        const cluster = await natsUp({
          nodes: Number(opts.nodes) as 1 | 3,
          dir: opts.dir,
          auth: opts.auth,
          tls: opts.tls === true,
          ...(port !== undefined ? { port } : {}),
        });
        process.stdout.write(
          `nats-server ${cluster.version}: ${cluster.nodes.map((n) => `${n.name} pid ${n.pid}`).join(', ')}${cluster.tls ? ' (TLS)' : ''}\n`,
        );
        process.stdout.write(`log location: ${cluster.urls.join(',')}\n`);
        for (const line of serverNotices(featuresOf(cluster.version), cluster.nodes.length)) process.stderr.write(`crucible: warning: ${line}\n`);
        if (cluster.auth) {
          process.stdout.write(`credentials (mode 0600, give each process its role's): ${NATS_ROLES.map((r) => credentialsFile(opts.dir, r)).join(' ')}\n`);
        } else {
          process.stdout.write('no auth: any client that reaches these ports may read and write every run\n');
        }
        if (opts.supervise) await supervise(opts.dir);
      } catch (err) {
        if (err instanceof NatsServerError) throw new UserError(err.message);
        throw err;
      }
    });
  nats
    .command('down')
    .description('stop the servers `nats up` started in DIR (by their recorded pids)')
    .requiredOption('--dir <dir>', 'the directory given to `nats up`')
    .option('--wipe', 'also delete their data')
    .action(async (opts: { dir: string; wipe?: boolean }) => {
      try {
        const n = await natsDown(opts.dir, { wipe: opts.wipe === true });
        process.stdout.write(`stopped ${n} nats-server${n === 1 ? '' : 's'}\n`);
      } catch (err) {
        if (err instanceof NatsServerError) throw new UserError(err.message);
        throw err;
      }
    });
}
