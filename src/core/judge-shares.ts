/**
 * The Judge split by problem: with K shares, problem P belongs to share hash(P) mod K, and each
 * share's commits go to a log stream of its own (`judge/s<i>`), so that the optimistic
 * concurrency that fences a live Judge is per share and K live Judges never contend. Every Judge
 * folds the whole log (each share's commits included), so their states stay one state; only
 * the work, and who appends it, is split. With one share nothing changes: stream `judge`.
 */
import { createHash } from 'node:crypto';

export const JUDGE_STREAM = 'judge';
/** The most shares a run may have (each share's stream and lease are named in the judge
 * role's NATS permissions, which are written before any run). */
export const MAX_JUDGE_SHARES = 16;

/** The share of a problem, stable across processes and runs. */
export function shareOf(problemId: string, shares: number): number {
  if (shares <= 1) return 0;
  return createHash('sha256').update(problemId).digest().readUInt32BE(0) % shares;
}

/** The log stream a share's commits go to. */
export function judgeStreamOf(share: number, shares: number): string {
  return shares <= 1 ? JUDGE_STREAM : `${JUDGE_STREAM}/s${share}`;
}

/** Every stream the Judge may write: one Judge's, or a share's. */
export function isJudgeStream(stream: string): boolean {
  return stream === JUDGE_STREAM || /^judge\/s\d+$/.test(stream);
}

/** Every share stream a run can have (for permissions). */
export const JUDGE_SHARE_STREAMS: readonly string[] = Array.from({ length: MAX_JUDGE_SHARES }, (_, i) => judgeStreamOf(i, MAX_JUDGE_SHARES));

/** The lease of one share of a role (the role's own lease is `role-<role>`). */
export function shareLeaseName(role: string, share: number): string {
  return `role-${role}/s${share}`;
}
