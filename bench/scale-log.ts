/**
 * `bench scale --log`: which log the run is made on. Absent: the SQLite file in the run's folder.
 * `nats`: one nats-server the bench starts on a free loopback port and stops at the end (with
 * `--nodes 3`, three with cluster routes: the log's streams R3), with a user per role (auth on).
 * `nats://HOST:PORT[,...]`: a server or cluster already running (each server as HOST:PORT), and
 * with `--creds FILE` the credentials `crucible nats up` wrote for it (its admin's).
 */
import { UserError } from '../src/cli/errors.js';

export type ScaleLog = { kind: 'sqlite' } | { kind: 'local-nats'; nodes: 1 | 3 } | { kind: 'nats'; servers: string[]; creds?: string };

const USAGE = '"nats" (a local nats-server the bench starts) or nats://HOST:PORT[,HOST:PORT...] (a running server or cluster)';

/** A server of the list as nats://HOST:PORT, or null when it is not one. */
function server(text: string): string | null {
  const url = text.startsWith('nats://') ? text : `nats://${text}`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  const port = Number(parsed.port);
  const plain = parsed.username === '' && parsed.password === '' && (parsed.pathname === '' || parsed.pathname === '/') && !parsed.search && !parsed.hash;
  if (!plain || parsed.hostname === '' || !Number.isInteger(port) || port < 1 || port > 65535) return null;
  return `nats://${parsed.host}`;
}

/** The value of `--name`, once at most; undefined when absent. */
function single(args: readonly string[], name: string, what: string): string | undefined {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const value = args[at + 1];
  if (value === undefined || value === '' || value.startsWith('--')) throw new UserError(`bench scale: ${name} needs a value: ${what}`);
  if (args.indexOf(name, at + 1) >= 0) throw new UserError(`bench scale: ${name} is given twice`);
  return value;
}

export function parseScaleLog(args: readonly string[]): ScaleLog {
  const value = single(args, '--log', USAGE);
  const nodes = single(args, '--nodes', '1 or 3');
  const creds = single(args, '--creds', 'a credentials file `crucible nats up` wrote (DIR/admin.creds.json)');
  if (value === undefined) {
    if (nodes !== undefined || creds !== undefined)
      throw new UserError(`bench scale: ${nodes !== undefined ? '--nodes' : '--creds'} is for a run on JetStream: give --log too`);
    return { kind: 'sqlite' };
  }
  // --dir and --measure resume or measure the SQLite file a run left in a folder.
  for (const other of ['--dir', '--measure'])
    if (args.includes(other))
      throw new UserError(
        `bench scale: ${other} is for a run on the SQLite log, not with --log ${value} (CRUCIBLE_BENCH_KEEP=1 keeps the run's folder and streams)`,
      );
  if (value === 'nats') {
    if (creds !== undefined)
      throw new UserError('bench scale: --creds is for a server given as nats://HOST:PORT; the servers --log nats starts make their own');
    if (nodes !== undefined && nodes !== '1' && nodes !== '3') throw new UserError(`bench scale: --nodes ${nodes}: expected 1 or 3`);
    return { kind: 'local-nats', nodes: nodes === '3' ? 3 : 1 };
  }
  if (nodes !== undefined) throw new UserError(`bench scale: --nodes is for the servers --log nats starts, not with --log ${value}`);
  if (!value.startsWith('nats://')) throw new UserError(`bench scale: --log takes ${USAGE}, got "${value}"`);
  const servers: string[] = [];
  for (const part of value.split(',')) {
    const s = server(part.trim());
    if (s === null) throw new UserError(`bench scale: --log takes ${USAGE}, got "${value}": "${part}" is not HOST:PORT`);
    servers.push(s);
  }
  return { kind: 'nats', servers, ...(creds !== undefined ? { creds } : {}) };
}
