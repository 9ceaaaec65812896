/**
 * The lines of a worker's stderr, each prefixed with the time it arrived (ISO 8601, UTC), for
 * `workers.log`: what happened when (a start, a fold, a lease taken, a lost server) can then be
 * read against other workers' lines and the cluster's own logs.
 */
import type { Readable, Writable } from 'node:stream';

/** Copies `from` to `to` a whole line at a time, each stamped; a last line without a newline is
 * written when `from` ends. Lines of several sources written to one `to` never interleave. */
export function stampLines(from: Readable, to: Writable, now: () => Date = () => new Date()): void {
  let partial = '';
  from.setEncoding('utf8');
  from.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    if (lines.length > 0) to.write(lines.map((l) => `${now().toISOString()} ${l}\n`).join(''));
  });
  from.on('end', () => {
    if (partial.length > 0) to.write(`${now().toISOString()} ${partial}\n`);
    partial = '';
  });
}
