import { describe, expect, it } from 'vitest';
import { watchForStall } from '../../src/events/jetstream/stall-watch.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the stall watch of a reader', () => {
  it('gives up a consumer that delivers nothing while the stream holds more, once', async () => {
    let gaveUp = 0;
    const watch = watchForStall(
      40,
      async () => true,
      () => gaveUp++,
    );
    await sleep(300);
    expect(watch.stalled).toBe(true);
    expect(gaveUp).toBe(1);
    watch.stop();
  });

  it('never while the reader is busy with a message, nor while the stream holds nothing more', async () => {
    let gaveUp = 0;
    const busy = watchForStall(
      40,
      async () => true,
      () => gaveUp++,
    );
    busy.busy();
    const caughtUp = watchForStall(
      40,
      async () => false,
      () => gaveUp++,
    );
    await sleep(300);
    expect([busy.stalled, caughtUp.stalled, gaveUp]).toEqual([false, false, 0]);
    // Waiting again: the busy one is now a stall.
    busy.waiting();
    await sleep(300);
    expect([busy.stalled, gaveUp]).toEqual([true, 1]);
    busy.stop();
    caughtUp.stop();
  });

  it('asks again after the stream could not be asked (the cluster away for now)', async () => {
    let asked = 0;
    let gaveUp = 0;
    const watch = watchForStall(
      20,
      async () => {
        asked++;
        if (asked < 3) throw new Error('no responders');
        return true;
      },
      () => gaveUp++,
    );
    await sleep(400);
    expect(asked).toBeGreaterThanOrEqual(3);
    expect([watch.stalled, gaveUp]).toEqual([true, 1]);
    watch.stop();
  });
});
