/**
 * The loop of a singleton role: fold, run the actor's pending effects (at most `concurrency` at
 * once, in the order the actor lists them) while holding the role's lease, append each output
 * as soon as its effect finishes, wait for the log to move. A standby folds too, so it takes
 * over at once from where the log stands. A role split in shares (the Judge, `shares` > 1) runs
 * the effects of the shares it holds and appends each to its share's stream.
 */
import { leaseNameOf } from './names.js';
import { FencedWriter } from './fence.js';
import { RoleLease } from './role-lease.js';
import { ShareLeases } from './share-leases.js';
import { judgeStreamOf, shareOf } from '../core/judge-shares.js';
import type { LoopContext } from './context.js';
import type { CommitRequest } from '../events/log.js';

/** Who may run and append an effect in this process. */
interface Ownership {
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly live: boolean;
  /** Where an effect's commit goes when this process owns the effect now, else null. */
  writerOf(effect: { key: string }): { writer: FencedWriter; stream: string | null } | null;
}

/** A singleton writes while it holds its lease, and only outputs of events the log still holds
 * (see ActorRuntime.verifyLastRead). */
const mayWrite = (ctx: LoopContext, holdsLease: () => Promise<boolean>) => async (): Promise<boolean> => {
  await ctx.runtime.verifyLastRead();
  return holdsLease();
};

function roleOwnership(ctx: LoopContext, leaseMs: number, wake: () => void): Ownership {
  const { role } = ctx;
  const lease = new RoleLease(ctx.board, leaseNameOf(role), ctx.workerId, leaseMs, (live) => {
    ctx.figures.state = live ? 'live' : 'standby';
    ctx.say(live ? `holds the ${role} lease: live (at ${ctx.since()})` : `lost the ${role} lease: standing by`);
    writer.reset();
    wake();
  });
  const writer = new FencedWriter(
    ctx.log,
    mayWrite(ctx, () => lease.ensure(Math.floor(leaseMs / 4))),
  );
  return {
    start: async () => {
      await lease.start();
      if (!lease.live) ctx.say(`another ${role} holds the lease: standing by`);
    },
    stop: () => lease.stop(),
    get live() {
      return lease.live;
    },
    writerOf: () => (lease.live ? { writer, stream: null } : null),
  };
}

/** The problem an effect works on (every Judge effect names its problem-round). */
const problemOf = (effect: { key: string }): string => (effect as { problem?: { problemId?: string } }).problem?.problemId ?? effect.key;

function shareOwnership(ctx: LoopContext, leaseMs: number, shares: number, wake: () => void): Ownership {
  const { role } = ctx;
  const writers = new Map<number, FencedWriter>();
  const writerOf = (share: number): FencedWriter => {
    let w = writers.get(share);
    if (!w)
      writers.set(
        share,
        (w = new FencedWriter(
          ctx.log,
          mayWrite(ctx, () => leases.ensure(share, Math.floor(leaseMs / 4))),
        )),
      );
    return w;
  };
  // Processes spread over the shares from the start: each prefers the share its id hashes to.
  const leases = new ShareLeases(ctx.board, role, ctx.workerId, shares, leaseMs, shareOf(ctx.workerId, shares), (held) => {
    ctx.figures.state = held.length > 0 ? 'live' : 'standby';
    ctx.say(
      held.length > 0 ? `holds ${role} shares ${held.join(', ')} of ${shares}: live (at ${ctx.since()})` : `holds no ${role} share of ${shares}: standing by`,
    );
    for (const w of writers.values()) w.reset();
    wake();
  });
  return {
    start: () => leases.start(),
    stop: () => leases.stop(),
    get live() {
      return leases.held.length > 0;
    },
    writerOf: (effect) => {
      const share = shareOf(problemOf(effect), shares);
      return leases.holds(share) ? { writer: writerOf(share), stream: judgeStreamOf(share, shares) } : null;
    },
  };
}

export async function runSingleton(ctx: LoopContext, leaseMs: number, shares = 1): Promise<void> {
  const { runtime, role, wake, figures } = ctx;
  const owner = shares > 1 ? shareOwnership(ctx, leaseMs, shares, () => wake.signal()) : roleOwnership(ctx, leaseMs, () => wake.signal());
  const inflight = new Map<string, Promise<void>>();
  /** Effects whose output this process appended (or found there), until the fold drops them. */
  const recorded = new Set<string>();
  let failure: unknown = null;
  await owner.start();
  try {
    while (!ctx.completion.completed && !ctx.stopped()) {
      await ctx.fold();
      if (failure) throw failure;
      if (ctx.completion.completed) break;
      const pending = runtime.pendingOf(role);
      const keys = new Set(pending.map((e) => e.key));
      for (const k of recorded) if (!keys.has(k)) recorded.delete(k);
      figures.pending = pending.length - recorded.size;
      if (owner.live) {
        for (const effect of pending) {
          if (inflight.size >= ctx.concurrency) break;
          if (inflight.has(effect.key) || recorded.has(effect.key)) continue;
          const target = owner.writerOf(effect);
          if (!target) continue;
          const job = (async () => {
            try {
              const made = await runtime.runEffect(role, effect);
              const commit: CommitRequest = target.stream === null ? made : { ...made, stream: target.stream };
              const result = await target.writer.append(commit);
              if (result === 'written' && figures.written++ === 0) ctx.say(`first commit appended at ${ctx.since()}`);
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
    await owner.stop();
  }
  if (failure) throw failure;
}
