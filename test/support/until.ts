/** Polling in tests: wait for a condition that other processes make true. */

/** The first truthy value `probe` gives (a probe that throws counts as not yet), polled every
 * 100 ms; throws naming `what` after `ms`. */
export async function until<T>(what: string, ms: number, probe: () => Promise<T | null | undefined | false>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
