/**
 * The in-process actor runtime: one dispatcher over the event log.
 *
 * Every actor is a pure xstate machine plus a pure `pending(snapshot)` that names the work whose
 * output is not in the log yet, and an effect runner that does that work and returns the events
 * to append. The dispatcher folds each new event into every live actor (in position order), then
 * runs the pending effects and appends their outputs with an idempotency key derived from the
 * effect. Because the outputs go through the log before they are folded, an actor's state is a
 * projection of the log: a restarted actor refolds the log, runs no effect while doing so, and
 * picks up exactly the work that was not finished. Effects of one step run concurrently but are
 * appended in a fixed actor/effect order, so one process with one seed writes one log.
 */
import { initialTransition, transition, type AnyStateMachine, type SnapshotFrom } from 'xstate';
import type { EventEnvelope, NewEvent } from '../events/envelope.js';
import { ORIGIN, type EventLog, type Position } from '../events/log.js';

export interface Effect {
  /** Unique and deterministic for the work it names: the commit id of its output. */
  readonly key: string;
}

/** A list of pending work without the item `key`: the same array when it holds no such item,
 * so folding an event that finishes nothing copies nothing. */
export function withoutKey<T extends Effect>(items: T[], key: string): T[] {
  return items.some((i) => i.key === key) ? items.filter((i) => i.key !== key) : items;
}

/** The machines receive log events wrapped so that xstate can route on `type`. */
export interface LogEvent {
  type: string;
  envelope: EventEnvelope;
}

/** An index an actor keeps beside its machine (e.g. recorded verdicts by pair), so each event
 * costs O(1) instead of growing the machine's context. Owned by one live actor: created empty
 * when the actor (re)starts and rebuilt by folding the log, never shared with another actor. */
export interface SideIndex<I> {
  create(): I;
  observe(index: I, envelope: EventEnvelope): void;
  /** Event types it needs besides those the machine handles. */
  readonly types: readonly string[];
}

export interface ActorDefinition<M extends AnyStateMachine, E extends Effect, Env, I = undefined> {
  /** Stream name of its outputs, and its name in logs. */
  readonly name: string;
  readonly machine: M;
  /** Work to do now, given everything folded so far. Pure: never reads the side index. */
  pending(snapshot: SnapshotFrom<M>): readonly E[];
  /** Does the work and returns the events to append (all in one commit). */
  run(effect: E, env: Env, snapshot: SnapshotFrom<M>, index: I): Promise<NewEvent[]>;
  readonly index?: SideIndex<I>;
}

// The runtime stores actors of different machine types side by side.
type AnyActor<Env> = ActorDefinition<AnyStateMachine, Effect, Env, unknown>;

interface LiveActor<Env> {
  def: AnyActor<Env>;
  snapshot: SnapshotFrom<AnyStateMachine> | null;
  /** The actor's own side index (see SideIndex); undefined when it keeps none. */
  index: unknown;
  /** Event types this actor folds: a transition costs microseconds, most events concern few actors. */
  types: ReadonlySet<string>;
}

function typesOf(def: ActorDefinition<AnyStateMachine, Effect, unknown, unknown>): Set<string> {
  const types = new Set<string>(def.index?.types ?? []);
  type Node = { events: string[]; states: Record<string, Node> };
  const visit = (node: Node) => {
    for (const t of node.events) types.add(t);
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(def.machine.root as unknown as Node);
  return types;
}

export interface RuntimeHooks {
  /** Called after each dispatch step with the log head. */
  onStep?(head: Position): void | Promise<void>;
  /** Called when nothing is left to do; return true to look again (e.g. after restarting an actor). */
  onIdle?(): boolean | Promise<boolean>;
  /** Stop when this returns true (checked after each step). */
  shouldStop?(): boolean;
}

export class ActorFailedError extends Error {
  constructor(
    readonly actor: string,
    readonly effectKey: string,
    cause: unknown,
  ) {
    super(`actor ${actor} failed on ${effectKey}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ActorFailedError';
  }
}

export class ActorRuntime<Env> {
  readonly #log: EventLog;
  readonly #runId: string;
  readonly #env: Env;
  readonly #actors = new Map<string, LiveActor<Env>>();
  /** Position of the last event folded into the live actors. */
  #position: Position = ORIGIN;
  /** Events folded so far (progress reports; positions are not counts). */
  #folded = 0;

  readonly #views: readonly ((envelope: EventEnvelope) => void)[];

  /** `views` are process-wide read models (e.g. where each policy version is), fed every event. */
  constructor(log: EventLog, runId: string, env: Env, actors: readonly AnyActor<Env>[], views: readonly ((envelope: EventEnvelope) => void)[] = []) {
    this.#views = views;
    this.#log = log;
    this.#runId = runId;
    this.#env = env;
    for (const def of actors) this.#actors.set(def.name, { def, snapshot: null, index: undefined, types: typesOf(def as never) });
  }

  get position(): Position {
    return this.#position;
  }

  /** How many events the dispatcher has folded. */
  get eventsFolded(): number {
    return this.#folded;
  }

  /** Folds the log into every actor that has no state yet, running no effect. */
  async start(): Promise<void> {
    for (const name of this.#actors.keys()) {
      const actor = this.#actors.get(name)!;
      if (actor.snapshot === null) await this.restart(name);
    }
  }

  /** Drops an actor's state, as if its process died. Its work waits until it is restarted. */
  kill(name: string): void {
    const actor = this.#require(name);
    actor.snapshot = null;
    actor.index = undefined;
  }

  isAlive(name: string): boolean {
    return this.#require(name).snapshot !== null;
  }

  /** Rebuilds an actor from the log up to the dispatcher's position (replay: no effects). */
  async restart(name: string): Promise<void> {
    const actor = this.#require(name);
    actor.index = actor.def.index?.create();
    let snapshot = initialTransition(actor.def.machine)[0];
    if (this.#position !== ORIGIN) {
      for await (const envelope of this.#log.read({ to: this.#position }, { runId: this.#runId, types: [...actor.types] })) {
        snapshot = this.#fold(actor, snapshot, envelope);
      }
    }
    actor.snapshot = snapshot;
  }

  /**
   * Runs until no live actor has work and no new event arrives, or until `shouldStop`.
   * Returns true when it stopped because everything was done.
   */
  async run(hooks: RuntimeHooks = {}): Promise<boolean> {
    for (;;) {
      const folded = await this.#foldNewEvents();
      const ran = await this.#runPendingEffects();
      await hooks.onStep?.(this.#position);
      if (hooks.shouldStop?.()) return false;
      if (!folded && !ran && !(await hooks.onIdle?.())) return true;
    }
  }

  snapshotOf(name: string): SnapshotFrom<AnyStateMachine> | null {
    return this.#require(name).snapshot;
  }

  #require(name: string): LiveActor<Env> {
    const actor = this.#actors.get(name);
    if (!actor) throw new Error(`no actor named ${name}`);
    return actor;
  }

  #fold(actor: LiveActor<Env>, snapshot: SnapshotFrom<AnyStateMachine>, envelope: EventEnvelope) {
    const def = actor.def;
    def.index?.observe(actor.index, envelope);
    const event: LogEvent = { type: envelope.type, envelope };
    const [next] = transition(def.machine, snapshot, event);
    if (next.status === 'error') {
      throw new ActorFailedError(def.name, `fold of ${envelope.type} at ${envelope.position}`, next.error);
    }
    return next;
  }

  async #foldNewEvents(): Promise<boolean> {
    let any = false;
    for await (const envelope of this.#log.read({ after: this.#position }, { runId: this.#runId })) {
      for (const view of this.#views) view(envelope);
      for (const actor of this.#actors.values()) {
        if (actor.snapshot !== null && actor.types.has(envelope.type)) actor.snapshot = this.#fold(actor, actor.snapshot, envelope);
      }
      this.#position = envelope.position;
      this.#folded++;
      any = true;
    }
    return any;
  }

  async #runPendingEffects(): Promise<boolean> {
    const work: { actor: LiveActor<Env>; effect: Effect; snapshot: SnapshotFrom<AnyStateMachine> }[] = [];
    for (const actor of this.#actors.values()) {
      if (actor.snapshot === null) continue;
      for (const effect of actor.def.pending(actor.snapshot)) {
        work.push({ actor, effect, snapshot: actor.snapshot });
      }
    }
    if (work.length === 0) return false;
    const outputs = await Promise.allSettled(
      work.map(({ actor, effect, snapshot }) => actor.def.run(effect, this.#env, snapshot, actor.index)),
    );
    // Appended in the order the work was listed, whatever order it finished in.
    let wroteAny = false;
    for (let i = 0; i < work.length; i++) {
      const { actor, effect } = work[i]!;
      const outcome = outputs[i]!;
      if (outcome.status === 'rejected') throw new ActorFailedError(actor.def.name, effect.key, outcome.reason);
      if (outcome.value.length === 0) throw new ActorFailedError(actor.def.name, effect.key, new Error('effect produced no event'));
      const events = outcome.value.map((e) => ({ ...e, runId: e.runId ?? this.#runId }));
      const result = await this.#log.append(actor.def.name, events, { commitId: `${this.#runId}/${actor.def.name}/${effect.key}` });
      if (!result.duplicate) wroteAny = true;
    }
    // Every output was already in the log yet the work is still pending: the actor's machine
    // does not recognise its own outputs, and looping would never end.
    if (!wroteAny) throw new ActorFailedError(work[0]!.actor.def.name, work[0]!.effect.key, new Error('effect stays pending after its output was recorded'));
    return true;
  }
}
