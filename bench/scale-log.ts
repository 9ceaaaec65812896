/**
 * `bench scale --log`: which log the run is made on. Absent: the SQLite file in the run's folder.
 * `nats`: one nats-server the bench starts on a free loopback port and stops at the end.
 * `nats://HOST:PORT[,...]`: a server or cluster already running (each server as HOST:PORT).
 */
import { UserError } from '../src/cli/errors.js';

export type ScaleLog = { kind: 'sqlite' } | { kind: 'local-nats' } | { kind: 'nats'; servers: string[] };

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

export function parseScaleLog(args: readonly string[]): ScaleLog {
  const at = args.indexOf('--log');
  if (at < 0) return { kind: 'sqlite' };
  const value = args[at + 1];
  if (value === undefined || value === '' || value.startsWith('--')) throw new UserError(`bench scale: --log needs a value: ${USAGE}`);
  if (args.indexOf('--log', at + 1) >= 0) throw new UserError('bench scale: --log is given twice');
  // --dir and --measure resume or measure the SQLite file a run left in a folder.
  for (const other of ['--dir', '--measure'])
    if (args.includes(other))
      throw new UserError(
        `bench scale: ${other} is for a run on the SQLite log, not with --log ${value} (CRUCIBLE_BENCH_KEEP=1 keeps the run's folder and streams)`,
      );
  if (value === 'nats') return { kind: 'local-nats' };
  if (!value.startsWith('nats://')) throw new UserError(`bench scale: --log takes ${USAGE}, got "${value}"`);
  const servers: string[] = [];
  for (const part of value.split(',')) {
    const s = server(part.trim());
    if (s === null) throw new UserError(`bench scale: --log takes ${USAGE}, got "${value}": "${part}" is not HOST:PORT`);
    servers.push(s);
  }
  return { kind: 'nats', servers };
}
