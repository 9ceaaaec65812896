/** Issuing asynchronous operations one after another, or with up to `window` in flight. */
export async function issueAll(count: number, pipelined: boolean, window: number, start: (i: number) => Promise<unknown>): Promise<void> {
  const inFlight = new Set<Promise<unknown>>();
  for (let i = 0; i < count; i++) {
    const p = start(i);
    if (!pipelined) {
      await p;
      continue;
    }
    const q: Promise<unknown> = p.then(() => inFlight.delete(q));
    inFlight.add(q);
    if (inFlight.size >= window) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}
