/**
 * What `crucible run` shows while a run goes: on a terminal a bar redrawn in place (rounds, log
 * position, executions, an estimate of the time left; before round 1 of a run with a warm start,
 * its last recorded step and loss); otherwise, so that a log file or a pipe sees the run move, a
 * plain line per round completed and one per minute of a long round (of the warm start: one per
 * minute and one as each role's ends). The clock is passed in: the reporter itself is a pure
 * state machine over progress and time.
 */
import type { RunProgress, RunResume } from '../actors/run.js';
import type { WarmStartProgress } from '../actors/warm-start.js';

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

/** The warm start's last recorded step: "warm start code step 40/250, loss 1.234" (the loss
 * left out for a checkpoint taken from the cache). */
export function warmStartText(w: WarmStartProgress): string {
  const loss = w.loss === null ? (w.step === w.steps && w.step > 0 ? ' (cached)' : '') : `, loss ${w.loss.toFixed(3)}`;
  return `warm start ${w.role} step ${w.step}/${w.steps}${loss}`;
}

export function progressBar(p: RunProgress, secs: number | null): string {
  const width = 30;
  if (p.warmStart) {
    const w = p.warmStart;
    const done = Math.round((width * w.step) / Math.max(1, w.steps));
    return `\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${warmStartText(w)}  position ${p.position}`;
  }
  const done = Math.round((width * p.round) / Math.max(1, p.rounds));
  return `\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] round ${p.round}/${p.rounds}  position ${p.position}  ${p.executions} executions  ${left(secs)}`;
}

export function progressLine(p: RunProgress, secs: number | null, roundDone: boolean): string {
  if (p.warmStart) return `crucible: ${warmStartText(p.warmStart)}: log position ${p.position}\n`;
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
  /** The warm start's last line, and the role whose end it said. */
  #warmLineMs: number | null = null;
  #warmDone = '';

  constructor(
    private readonly terminal: boolean,
    private readonly write: (text: string) => void,
    private readonly label = '',
  ) {}

  report(p: RunProgress, nowMs: number): void {
    // The warm start is apart: its minutes do not count into the rounds' estimate.
    if (p.warmStart) return this.#warmStart(p, nowMs);
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

  /** On a terminal the bar; otherwise a line per minute of the warm start, and one as each
   * role's last step is recorded. */
  #warmStart(p: RunProgress, nowMs: number): void {
    const w = p.warmStart!;
    if (this.terminal) {
      this.write(`${progressBar(p, null)}${this.label}`);
      return;
    }
    this.#warmLineMs ??= nowMs;
    const ended = w.step === w.steps && this.#warmDone !== w.role;
    if (!ended && nowMs - this.#warmLineMs < LINE_EVERY_MS) return;
    if (ended) this.#warmDone = w.role;
    this.#warmLineMs = nowMs;
    this.write(`${progressLine(p, null, false).trimEnd()}${this.label}\n`);
  }
}
