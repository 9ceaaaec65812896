/**
 * The loop of a singleton role: fold, run the actor's pending effects (at most `concurrency` at
 * once, in the order the actor lists them) while holding the role's lease, append each output
 * as soon as its effect finishes, wait for the log to move. A standby folds too, so it takes
 * over at once from where the log stands.
 */
import { leaseNameOf } from './names.js';
import { FencedWriter } from './fence.js';
import { RoleLease } from './role-lease.js';
import type { LoopContext } from './context.js';

export async function runSingleton(ctx: LoopContext, leaseMs: number): Promise<void> {
  const { runtime, role, wake, figures } = ctx;
  const lease = new RoleLease(ctx.board, leaseNameOf(role), ctx.workerId, leaseMs, (live) => {
    figures.state = live ? 'live' : 'standby';
    ctx.say(live ? `holds the ${role} lease: live` : `lost the ${role} lease: standing by`);
    writer.reset();
    wake.signal();
  });
  const writer = new FencedWriter(ctx.log, () => lease.ensure(Math.floor(leaseMs / 4)));
  const inflight = new Map<string, Promise<void>>();
  /** Effects whose output this process appended (or found there), until the fold drops them. */
  const recorded = new Set<string>();
  let failure: unknown = null;
  await lease.start();
  if (!lease.live) ctx.say(`another ${role} holds the lease: standing by`);
  try {
    while (!ctx.completion.completed && !ctx.stopped()) {
      await ctx.fold();
      if (failure) throw failure;
      if (ctx.completion.completed) break;
      const pending = runtime.pendingOf(role);
      const keys = new Set(pending.map((e) => e.key));
      for (const k of recorded) if (!keys.has(k)) recorded.delete(k);
      figures.pending = pending.length - recorded.size;
      if (lease.live) {
        for (const effect of pending) {
          if (inflight.size >= ctx.concurrency) break;
          if (inflight.has(effect.key) || recorded.has(effect.key)) continue;
          const job = (async () => {
            try {
              const commit = await runtime.runEffect(role, effect);
              const result = await writer.append(commit);
              if (result === 'written') figures.written++;
              if (result === 'duplicate') figures.duplicates++;
              if (result === 'fenced') figures.fenced++;
              else recorded.add(effect.key);
            } catch (err) {
              failure ??= err;
            } finally {
              inflight.delete(effect.key);
              figures.running = inflight.size;
              wake.signal();
            }
          })();
          inflight.set(effect.key, job);
          figures.running = inflight.size;
        }
      }
      await wake.wait(Math.max(100, Math.floor(leaseMs / 3)));
    }
  } finally {
    figures.state = 'stopping';
    await Promise.allSettled(inflight.values());
    await lease.stop();
  }
  if (failure) throw failure;
}
