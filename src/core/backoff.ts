/** The wait after the `failed`-th failed try (1-based) of anything retried in the project:
 * `baseMs`, doubled for each failure after the first, never more than `maxMs`. Pure, so tests
 * can check a schedule. */
export function backoffMs(baseMs: number, maxMs: number, failed: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, failed - 1));
}
