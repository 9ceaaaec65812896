/**
 * An actor's state as the log builds it, through xstate's public API only: a running xstate actor
 * of its machine (created fresh or from a persisted snapshot) that is sent the log's events one
 * by one, its snapshot after each being the state. The runtime folds every live actor this way,
 * and ablation folds the recorded Judge the same way: one fold for both.
 *
 * The machines are pure (assign, spawn, send to their own children): nothing they do reaches
 * outside the actor, and a transition is done when `send` returns (xstate processes an idle
 * actor's mailbox at once), so folding stays synchronous.
 */
import { createActor, type Actor, type AnyStateMachine, type SnapshotFrom } from 'xstate';
import type { EventEnvelope } from '../events/envelope.js';

/** The machines receive log events wrapped so that xstate can route on `type`. */
export interface LogEvent {
  type: string;
  envelope: EventEnvelope;
}

/** A fold that failed: the machine threw on an event (its snapshot is in error). */
export class FoldError extends Error {
  constructor(
    readonly machineId: string,
    readonly at: string,
    cause: unknown,
  ) {
    super(`the ${machineId} machine failed on ${at}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'FoldError';
  }
}

/** The event types a machine handles, in any of its states (xstate's own list). */
export function eventTypesOfMachine(machine: AnyStateMachine): Set<string> {
  return new Set(machine.root.events.map(String));
}

/** The ids of a machine's states, depth first: part of what a snapshot of it must agree with. */
export function stateIdsOf(machine: AnyStateMachine): string[] {
  const out: string[] = [];
  const visit = (node: AnyStateMachine['root']) => {
    out.push(node.id);
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(machine.root);
  return out;
}

export interface FoldOptions {
  /** Event types whose transition depends only on their commit (see
   * ActorDefinition.foldOncePerCommit): the first of each commit is sent, the rest skipped. */
  readonly oncePerCommit?: readonly string[];
}

export class ActorFold<M extends AnyStateMachine> {
  readonly #actor: Actor<M>;
  readonly #types: ReadonlySet<string>;
  readonly #once: ReadonlySet<string>;
  /** Commit and type of the last event sent of a `once` type. */
  #lastOnce = '';
  #failure: { error: unknown } | null = null;

  /** A fold from the machine's initial state, or from `persisted` (xstate's persisted snapshot,
   * already checked against the actor's schemas). Throws when the snapshot does not restore. */
  constructor(
    readonly machine: M,
    persisted?: unknown,
    options: FoldOptions = {},
  ) {
    this.#types = eventTypesOfMachine(machine);
    this.#once = new Set(options.oncePerCommit ?? []);
    // Machines take no input: the log's RunStarted sets them up.
    this.#actor = (createActor as (m: AnyStateMachine, o: object) => Actor<M>)(machine, persisted === undefined ? {} : { snapshot: persisted });
    // An error is read from the snapshot after each send; observing it here keeps xstate from
    // reporting it as unhandled on a later tick.
    this.#actor.subscribe({ error: (error) => (this.#failure = { error }) });
    this.#actor.start();
    this.#check('its start');
  }

  /** Whether the machine handles events of this type. */
  handles(type: string): boolean {
    return this.#types.has(type);
  }

  /** Folds one event of the log into the state (events the machine does not handle change
   * nothing). Throws FoldError when the machine throws. */
  fold(envelope: EventEnvelope): void {
    if (!this.#types.has(envelope.type)) return;
    if (this.#once.has(envelope.type)) {
      const k = `${envelope.type}\u0000${envelope.commitId}`;
      if (k === this.#lastOnce) return;
      this.#lastOnce = k;
    }
    const event: LogEvent = { type: envelope.type, envelope };
    this.#actor.send(event as never);
    this.#check(`${envelope.type} at ${envelope.position}`);
  }

  /** The state as of the last event folded (immutable: later folds make new snapshots). */
  get snapshot(): SnapshotFrom<M> {
    return this.#actor.getSnapshot() as SnapshotFrom<M>;
  }

  /** The state as a snapshot stores it (xstate's persisted form, children included). */
  persisted(): Record<string, unknown> {
    return this.#actor.getPersistedSnapshot() as Record<string, unknown>;
  }

  /** Ends the actor (its state is dropped or replaced). */
  stop(): void {
    this.#actor.stop();
  }

  #check(at: string): void {
    const s = this.#actor.getSnapshot() as { status: string; error?: unknown };
    if (s.status === 'error' || this.#failure) throw new FoldError(this.machine.id, at, this.#failure?.error ?? s.error);
  }
}
