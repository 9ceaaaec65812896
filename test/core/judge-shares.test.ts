import { describe, expect, it } from 'vitest';
import { isJudgeStream, judgeStreamOf, JUDGE_STREAM, MAX_JUDGE_SHARES, shareLeaseName, shareOf } from '../../src/core/judge-shares.js';

describe('the Judge split in shares', () => {
  it('one share is the Judge as it was: share 0, stream judge', () => {
    expect(shareOf('apps/0001', 1)).toBe(0);
    expect(judgeStreamOf(0, 1)).toBe(JUDGE_STREAM);
  });

  it('a problem has one share, the same every time, and problems spread over the shares', () => {
    const ids = Array.from({ length: 300 }, (_, i) => `demo/p${i}`);
    for (const k of [2, 3, 16]) {
      const counts = new Array<number>(k).fill(0);
      for (const id of ids) {
        const s = shareOf(id, k);
        expect(s).toBe(shareOf(id, k));
        expect(Array.from({ length: k }, (_, i) => i)).toContain(s);
        counts[s]!++;
      }
      // Every share gets work, none more than twice its fair part.
      for (const c of counts) expect(c).toBeGreaterThan(0);
      expect(Math.max(...counts)).toBeLessThan((2 * ids.length) / k);
    }
  });

  it('each share writes a stream of its own, and every one of them is a Judge stream', () => {
    const streams = Array.from({ length: MAX_JUDGE_SHARES }, (_, i) => judgeStreamOf(i, MAX_JUDGE_SHARES));
    expect(new Set(streams).size).toBe(MAX_JUDGE_SHARES);
    for (const s of [JUDGE_STREAM, ...streams]) expect(isJudgeStream(s)).toBe(true);
    for (const s of ['judges', 'judge/', 'judge/sx', 'queue/judge', 'executor', 'judge/s1/x']) expect(isJudgeStream(s)).toBe(false);
    expect(shareLeaseName('judge', 3)).toBe('role-judge/s3');
  });
});
