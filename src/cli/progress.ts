/**
 * What `crucible run` shows while a run goes: on a terminal a bar redrawn in place (rounds, log
 * position, executions, an estimate of the time left); otherwise, so that a log file or a pipe
 * sees the run move, a plain line per round completed and one per minute of a long round. The
 * clock is passed in: the reporter itself is a pure state machine over progress and time.
 */
import type { RunProgress, RunResume } from '../actors/run.js';

/** Seconds as "1h 02m", "3m 05s" or "42s". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${s}s`;
}

/** Seconds left: the mean time of the rounds this process completed, times the rounds left
 * (null before one is completed: no estimate yet). */
export function secondsLeft(p: RunProgress, since: { ms: number; round: number }, nowMs: number): number | null {
  const done = p.round - since.round;
  if (done <= 0) return null;
  return (((nowMs - since.ms) / done) * Math.max(0, p.rounds - p.round)) / 1000;
}

const left = (s: number | null) => (s === null ? 'time left: after the first round' : `about ${duration(s)} left`);

export function progressBar(p: RunProgress, secs: number | null): string {
  const width = 30;
  const done = Math.round((width * p.round) / Math.max(1, p.rounds));
  return `\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] round ${p.round}/${p.rounds}  position ${p.position}  ${p.executions} executions  ${left(secs)}`;
}

export function progressLine(p: RunProgress, secs: number | null, roundDone: boolean): string {
  const what = roundDone ? `round ${p.round}/${p.rounds} done` : `round ${p.round + 1}/${p.rounds} under way`;
  return `crucible: ${what}: log position ${p.position}, ${p.executions} executions, ${left(secs)}\n`;
}

export function resumeLine(runId: string, r: RunResume): string {
  return r.finished
    ? `crucible: run ${runId} had finished (log position ${r.position}): nothing left to run\n`
    : `crucible: resuming run ${runId} from position ${r.position}, round ${r.round}\n`;
}

/** A line at most this often within a round, without a terminal. */
export const LINE_EVERY_MS = 60_000;

/** Turns progress reports into output: `write` receives what to print. */
export class ProgressReporter {
  #since: { ms: number; round: number } | null = null;
  #lastRound = -1;
  #lastLineMs = 0;

  constructor(
    private readonly terminal: boolean,
    private readonly write: (text: string) => void,
    private readonly label = '',
  ) {}

  report(p: RunProgress, nowMs: number): void {
    if (this.#since === null) {
      this.#since = { ms: nowMs, round: p.round };
      this.#lastRound = p.round;
      this.#lastLineMs = nowMs;
    }
    const secs = secondsLeft(p, this.#since, nowMs);
    if (this.terminal) {
      this.write(`${progressBar(p, secs)}${this.label}`);
      return;
    }
    if (p.round !== this.#lastRound) {
      this.#lastRound = p.round;
      this.#lastLineMs = nowMs;
      this.write(`${progressLine(p, secs, true).trimEnd()}${this.label}\n`);
    } else if (nowMs - this.#lastLineMs >= LINE_EVERY_MS) {
      this.#lastLineMs = nowMs;
      this.write(`${progressLine(p, secs, false).trimEnd()}${this.label}\n`);
    }
  }
}
