/** What a benchmark's process writes to storage. */
import { readFileSync } from 'node:fs';

/** Bytes this process has caused to be written to storage so far (Linux's /proc/self/io; null
 * elsewhere): WAL frames, checkpoints and temporary files included. */
export function bytesWritten(): number | null {
  try {
    const m = /write_bytes: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}
