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
 * appended in a fixed actor/effect order, so one process with one seed writes one log; where the
 * log can (SQLite), the outputs of one step are appended in one transaction, one sync for all.
 * No decision may depend on that order (tests perturb it with an injected `scheduler`). An effect or
 * append that throws is retried and each failure recorded (see effect-failures.ts).
 *
 * With a snapshot table (./snapshots.ts) the runtime stores each actor's state every N folded
 * events (at the next moment its actors are at rest, within N more), and a (re)started actor
 * begins from its latest usable snapshot and folds only what came after it, snapshotting as it
 * folds.
 */
import type { AnyStateMachine, ContextFrom, SnapshotFrom } from 'xstate';
import { LogRewrittenError } from '../events/errors.js';
import { ActorFold, FoldError, eventTypesOfMachine, stateIdsOf, type LogEvent } from './actor-fold.js';
import type { z } from 'zod';
import type { EventEnvelope, NewEvent } from '../events/envelope.js';
import { ORIGIN, asPosition, type AppendResult, type CommitRequest, type EventLog, type Position, type ReadFilter, type ReadRange } from '../events/log.js';
import { readAtOf, type ReadAt } from '../events/read-at.js';
import {
  SNAPSHOT_FORMAT,
  decodeBody,
  encodeBody,
  SnapshotBody,
  SnapshotRefusedError,
  sha256Hex,
  type SideReader,
  type SideRows,
  type SnapshotTable,
  type StoredSnapshot,
} from './snapshots.js';
import { checkStoredState, snapshotVersion, type StateSchemas } from './snapshot-schema.js';
import { packJson, type Json } from '../events/packed-json.js';
import { DEFAULT_RETRY, type EffectFailure, type RetryPolicy } from './effect-failures.js';
import { ActorFailedError, EffectRunner, type EffectTask } from './effect-runner.js';
import { IN_ORDER, type StepScheduler } from './step-scheduler.js';

export { ActorFailedError, type LogEvent };

export interface Effect {
  /** Unique and deterministic for the work it names: the commit id of its output. */
  readonly key: string;
}

/** A list of pending work without the item `key`: the same array when it holds no such item,
 * so folding an event that finishes nothing copies nothing. */
export function withoutKey<T extends Effect>(items: T[], key: string): T[] {
  return items.some((i) => i.key === key) ? items.filter((i) => i.key !== key) : items;
}

/** An index an actor keeps beside its machine (e.g. recorded verdicts by pair), so each event
 * costs O(1) instead of growing the machine's context. Owned by one live actor: created empty
 * when the actor (re)starts and rebuilt by folding the log, never shared with another actor. */
export interface SideIndex<I> {
  /** `read`: point reads of the log the actor folds (an index may keep where its facts are in
   * the log instead of the facts, see program-history.ts). */
  create(read: ReadAt): I;
  observe(index: I, envelope: EventEnvelope): void;
  /** Event types it needs besides those the machine handles. */
  readonly types: readonly string[];
  /** For snapshots: the index as JSON data (stored packed, see packed-json.ts), and an index
   * from that data. An actor whose index lacks them is never snapshotted (it refolds from the
   * start). */
  serialize?(index: I): unknown;
  /** The data `serialize` returns: part of the snapshot version, and checked before `restore`
   * is handed stored data (which then is what this schema parsed). */
  readonly schema?: z.ZodType;
  /** `side`: the rows its snapshot kept beside the body (see sideRows). */
  restore?(data: unknown, side: SideReader, read: ReadAt): I;
  /** Rows kept beside the snapshot body rather than in it (see SideRows in snapshots.ts): those
   * changed since `sideSaved`; `sideSaved` is called once they are saved, with the rows as saved,
   * so the index can drop what they hold and read it there when asked. */
  sideRows?(index: I): SideRows;
  sideSaved?(index: I, saved: SideReader): void;
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
  /** The machines its machine spawns as children, by the name it spawns them under, with the
   * schema of each one's context: part of its snapshots' version and checked on restore. */
  readonly children?: Readonly<Record<string, { machine: AnyStateMachine; context: z.ZodType }>>;
  /** The schema of its machine's context: its snapshots' version is derived from it (with the
   * machine's shape and the index's schema, see snapshot-schema.ts), and a context read from a
   * snapshot is checked against it before it is restored. A change of what a field means that
   * leaves its shape as it was is told apart by saying so in the field's description
   * (`.describe(...)`), which is part of the version. */
  readonly context: z.ZodType<ContextFrom<M>>;
  /** Event types whose transition depends only on their commit, not on which event of it (all
   * verdicts of one request are one commit and complete it together): the machine folds the
   * first of each commit and skips the rest, which would change nothing; the side index still
   * observes every one. */
  readonly foldOncePerCommit?: readonly string[];
  /** Whether its state holds no work in flight (the Judge between steps: no problem open), so
   * that a snapshot now stores the run's history, not a step's work (a Code-A1 step's open
   * problems are most of the Judge's state). A snapshot that is due waits for a moment when every
   * actor that has this is at rest, for at most as many events again (see SnapshotOptions).
   * Absent: always at rest. */
  atRest?(snapshot: SnapshotFrom<M>): boolean;
  /** The event recording one failed try of an effect, when the actor has one of its own (the
   * Learner's TrainingStepFailed); null or absent: the generic EffectFailed. */
  failureEvent?(effect: E, failure: EffectFailure, env: Env): NewEvent | null;
}

// The runtime stores actors of different machine types side by side.
type AnyActor<Env> = ActorDefinition<AnyStateMachine, Effect, Env, unknown>;

interface LiveActor<Env> {
  def: AnyActor<Env>;
  /** Its machine's state, folded from the log (null: not alive). */
  fold: ActorFold<AnyStateMachine> | null;
  /** The actor's own side index (see SideIndex); undefined when it keeps none. */
  index: unknown;
  /** Event types this actor folds: a transition costs microseconds, most events concern few actors. */
  types: ReadonlySet<string>;
  /** What its snapshots are versioned by and checked against (see snapshot-schema.ts). */
  schemas: StateSchemas;
  /** Version of its snapshots (see snapshot-schema.ts). */
  version: string;
  /** Whether it can be snapshotted (its index, if any, serializes and has a schema). */
  snapshottable: boolean;
}

/** The event types an actor folds: those its machine handles and those its index reads. */
export function eventTypesOf(def: ActorDefinition<AnyStateMachine, Effect, never, unknown>): Set<string> {
  const types = machineTypesOf(def);
  for (const t of def.index?.types ?? []) types.add(t);
  return types;
}

function machineTypesOf(def: ActorDefinition<AnyStateMachine, Effect, never, unknown>): Set<string> {
  return eventTypesOfMachine(def.machine);
}

/** State ids and event types, its child machines' too: what a snapshot of this machine must
 * agree with. */
function shapeOf(def: ActorDefinition<AnyStateMachine, Effect, never, unknown>): string[] {
  const out = [`actor ${def.name}`, ...[...eventTypesOf(def)].sort(), ...stateIdsOf(def.machine).map((id) => `state ${id}`)];
  for (const [src, child] of Object.entries(def.children ?? {})) {
    out.push(`child ${src}`, ...[...eventTypesOfMachine(child.machine)].sort(), ...stateIdsOf(child.machine).map((id) => `state ${id}`));
  }
  return out;
}

/** What an actor's snapshots are versioned by and checked against: its context's schema, its
 * index's and its child machines' (see snapshot-schema.ts). */
export function stateSchemasOf(def: ActorDefinition<AnyStateMachine, Effect, never, unknown>): StateSchemas {
  const children = def.children ? Object.fromEntries(Object.entries(def.children).map(([src, c]) => [src, c.context])) : undefined;
  return { context: def.context, ...(def.index?.schema ? { index: def.index.schema } : {}), ...(children ? { children } : {}) };
}

const atRest = <Env>(actor: LiveActor<Env>, snapshot: SnapshotFrom<AnyStateMachine>): boolean => actor.def.atRest?.(snapshot) ?? true;

/** Process-wide read models fed by the dispatcher (e.g. where each policy version is). */
export interface RuntimeView {
  readonly types: readonly string[];
  observe(envelope: EventEnvelope): void;
}

export interface SnapshotOptions {
  table: SnapshotTable;
  /** Take a snapshot of every live actor after this many events folded since the last one, at
   * the first moment after that when its actors are at rest (see ActorDefinition.atRest), or
   * once twice as many are folded if none comes; 0: take none (existing ones are still used). */
  every: number;
}

/** How an actor was (re)built: from a snapshot or from the start, and how much it folded. */
export interface RestartReport {
  actor: string;
  /** 'used': from `from`; 'none': no snapshot; 'ignored': of another version (another schema
   * or machine shape); 'refused': unusable (see `refused`). In the last three it folds from the
   * start. */
  snapshot: 'used' | 'none' | 'ignored' | 'refused';
  refused?: SnapshotRefusedError;
  /** Why a snapshot was 'ignored': the versions (the first part is the snapshot format). */
  ignored?: string;
  /** Folding began after this position (ORIGIN: the start) and ended at `to`. */
  from: Position;
  to: Position;
  /** Events folded into the actor by this restart. */
  eventsFolded: number;
}

export interface RuntimeOptions {
  views?: readonly RuntimeView[];
  snapshots?: SnapshotOptions;
  /** Called once per actor (re)built by start() or restart(). */
  onRestart?(report: RestartReport): void;
  /** How often a failing effect (or append) is tried before the run fails (default DEFAULT_RETRY). */
  retry?: RetryPolicy;
  /** Which pending effects each step runs and the order of their appends (default IN_ORDER;
   * tests inject one that perturbs it, see step-scheduler.ts). */
  scheduler?: StepScheduler;
}

export interface RuntimeHooks {
  /** Called after each dispatch step with the log head. */
  onStep?(head: Position): void | Promise<void>;
  /** Called when nothing is left to do; return true to look again (e.g. after restarting an actor). */
  onIdle?(): boolean | Promise<boolean>;
  /** Stop when this returns true (checked after each step). */
  shouldStop?(): boolean;
}

interface Begun<Env> {
  actor: LiveActor<Env>;
  fold: ActorFold<AnyStateMachine>;
  index: unknown;
  report: RestartReport;
  /** The snapshot used: its checkpoint and the last event it folded (to ask the log about). */
  from?: { ref: StoredSnapshot['ref']; lastRead: { position: Position; commitId: string } | undefined };
}

export class ActorRuntime<Env> {
  readonly #log: EventLog;
  readonly #readAt: ReadAt;
  readonly #runId: string;
  readonly #env: Env;
  readonly #actors = new Map<string, LiveActor<Env>>();
  /** Position of the last event folded into the live actors. */
  #position: Position = ORIGIN;
  /** Events folded by this process's dispatcher (progress reports; positions are not counts). */
  #folded = 0;
  /** Events folded by the dispatcher when the last snapshots were taken. */
  #snapshotAt = 0;

  readonly #views: readonly RuntimeView[];
  readonly #snapshots: SnapshotOptions | undefined;
  readonly #onRestart: ((report: RestartReport) => void) | undefined;
  readonly #runner: EffectRunner;
  readonly #scheduler: StepScheduler;

  constructor(log: EventLog, runId: string, env: Env, actors: readonly AnyActor<Env>[], options: RuntimeOptions = {}) {
    this.#views = options.views ?? [];
    this.#snapshots = options.snapshots;
    this.#onRestart = options.onRestart;
    this.#runner = new EffectRunner(log, runId, options.retry ?? DEFAULT_RETRY);
    this.#scheduler = options.scheduler ?? IN_ORDER;
    this.#log = log;
    this.#readAt = readAtOf(log);
    this.#runId = runId;
    this.#env = env;
    for (const def of actors) {
      const schemas = stateSchemasOf(def as never);
      this.#actors.set(def.name, {
        def,
        schemas,
        fold: null,
        index: undefined,
        types: eventTypesOf(def as never),
        version: snapshotVersion(shapeOf(def as never), schemas),
        snapshottable: !def.index || (def.index.serialize !== undefined && def.index.restore !== undefined && def.index.schema !== undefined),
      });
    }
  }

  get position(): Position {
    return this.#position;
  }

  /** The informational time of the latest event this runtime has read (null before any): at a
   * restart, about when the log was last written, i.e. when the run stopped. */
  get latestAt(): string | null {
    return this.#latest?.at ?? null;
  }

  #latest: { position: Position; at: string } | null = null;

  #saw(envelope: EventEnvelope): void {
    if (this.#latest === null || envelope.position > this.#latest.position) {
      this.#latest = { position: envelope.position, at: envelope.at };
      this.#lastRead = { position: envelope.position, commitId: envelope.commitId };
    }
  }

  /** The last event read (by the dispatcher, a view or a refold), or restored with a snapshot. */
  #lastRead: { position: Position; commitId: string } | null = null;

  /** Asks the log whether it still holds the last event read (see EventLog.commitIdAt). A reader
   * that folded messages a failing-over cluster then dropped cannot unfold them: the answer is a
   * LogRewrittenError, and its process starts again from the log. The promise never rejects
   * (its error is its value), so it can be asked beside a read and awaited before anything read
   * is folded: the check costs no round trip of its own. */
  #askLastRead(): Promise<unknown> {
    const log = this.#log;
    const last = this.#lastRead;
    if (!log.commitIdAt || last === null) return Promise.resolve(null);
    return log.commitIdAt(last.position).then(
      (now) => (now === last.commitId ? null : new LogRewrittenError(last.position, last.commitId, now)),
      (err: unknown) => err ?? new Error('the log failed to say what it holds at a position'),
    );
  }

  async #throwIfAnswered(answer: Promise<unknown>): Promise<void> {
    const err = await answer;
    if (err) throw err;
  }

  /** Throws LogRewrittenError when the log no longer holds the last event this runtime read. A
   * writer asks before it appends: an output derived from events the log dropped (a request a
   * failing-over cluster showed, then lost) must not land in the log without them. */
  async verifyLastRead(): Promise<void> {
    await this.#throwIfAnswered(this.#askLastRead());
  }

  /** How many events the dispatcher has folded. */
  get eventsFolded(): number {
    return this.#folded;
  }

  /** Brings every actor that has no state yet up to the log's head, each from its latest usable
   * snapshot or from the start, in one read; feeds the views from the start. Runs no effect. */
  async start(): Promise<void> {
    const head = await this.#log.head();
    if (head !== ORIGIN) {
      for (const view of this.#views) {
        for await (const envelope of this.#log.read({ to: head }, { runId: this.#runId, types: [...view.types] })) {
          view.observe(envelope);
          this.#saw(envelope);
        }
      }
    }
    const begun = [];
    for (const actor of this.#actors.values()) if (actor.fold === null) begun.push(this.#begin(actor, head));
    if (begun.length > 0) await this.#foldInto(await this.#stillInLog(begun, head), head);
    this.#position = head;
  }

  /** Drops an actor's state, as if its process died. Its work waits until it is restarted. */
  kill(name: string): void {
    const actor = this.#require(name);
    actor.fold?.stop();
    actor.fold = null;
    actor.index = undefined;
  }

  isAlive(name: string): boolean {
    return this.#require(name).fold !== null;
  }

  /** Rebuilds an actor up to the dispatcher's position, from its latest usable snapshot or from
   * the start (replay: no effects). */
  async restart(name: string): Promise<void> {
    const actor = this.#require(name);
    actor.fold?.stop();
    actor.fold = null;
    await this.#foldInto(await this.#stillInLog([this.#begin(actor, this.#position)], this.#position), this.#position);
  }

  /** Each begun actor whose snapshot folded a commit the log no longer holds (a failing-over
   * cluster showed it, then dropped it) starts from the start instead; the rest as begun. The
   * last event each snapshot folded becomes the one the next fold asks the log about. */
  async #stillInLog(begun: Begun<Env>[], upTo: Position): Promise<Begun<Env>[]> {
    const log = this.#log;
    if (!log.commitIdAt) return begun;
    return Promise.all(
      begun.map(async (b) => {
        const last = b.from?.lastRead;
        if (!b.from || !last) return b;
        const now = await log.commitIdAt!(last.position);
        if (now === last.commitId) {
          if (this.#lastRead === null || last.position > this.#lastRead.position) this.#lastRead = last;
          return b;
        }
        b.fold.stop();
        const refused = new SnapshotRefusedError(
          b.actor.def.name,
          b.from.ref,
          `the log no longer holds the last commit it folded (at position ${last.position} it read commit "${last.commitId}", the log now holds ${now === null ? 'no message there' : `commit "${now}"`})`,
        );
        return this.#fresh(b.actor, upTo, 'refused', refused);
      }),
    );
  }

  /** An actor begun from its initial state, to fold the log from the start up to `upTo`. */
  #fresh(actor: LiveActor<Env>, upTo: Position, snapshot: RestartReport['snapshot'], refused?: SnapshotRefusedError, ignored?: string): Begun<Env> {
    return {
      actor,
      fold: this.#newFold(actor),
      index: actor.def.index?.create(this.#readAt),
      report: { actor: actor.def.name, snapshot, ...(refused ? { refused } : {}), ...(ignored ? { ignored } : {}), from: ORIGIN, to: upTo, eventsFolded: 0 },
    };
  }

  /** The actor's state as a snapshot stores it: xstate's persisted snapshot and the serialized
   * index (null when it keeps none). Null when the actor is not alive. */
  persistedStateOf(name: string): { machine: unknown; index: unknown } | null {
    const actor = this.#require(name);
    return actor.fold === null ? null : this.#persisted(actor, actor.fold, actor.index);
  }

  /** An actor's state as a snapshot body stores it (its side rows apart). */
  #persisted(actor: LiveActor<Env>, fold: ActorFold<AnyStateMachine>, index: unknown): { machine: Record<string, unknown>; index: unknown } {
    const serialized = actor.def.index?.serialize ? packJson(actor.def.index.serialize(index) as Json) : null;
    return { machine: fold.persisted(), index: serialized };
  }

  /** An actor's starting state: its latest usable snapshot at or before `upTo`, else the initial one. */
  #begin(actor: LiveActor<Env>, upTo: Position): Begun<Env> {
    const name = actor.def.name;
    const fresh = (snapshot: RestartReport['snapshot'], refused?: SnapshotRefusedError, ignored?: string) =>
      this.#fresh(actor, upTo, snapshot, refused, ignored);
    const stored = this.#snapshots?.table.latest(name) ?? null;
    if (stored === null || !actor.snapshottable) return fresh('none');
    const { ref } = stored;
    if (ref.version !== actor.version)
      return fresh(
        'ignored',
        undefined,
        `its snapshot at position ${ref.position} is of version ${ref.version} (snapshot format ${ref.version.split('/')[0]}), this ${name} reads ${actor.version}: it folds the log from the start instead`,
      );
    try {
      const { fold, index, lastRead } = this.#restore(actor, stored, upTo);
      return { actor, fold, index, report: { actor: name, snapshot: 'used', from: ref.position, to: upTo, eventsFolded: 0 }, from: { ref, lastRead } };
    } catch (err) {
      if (!(err instanceof SnapshotRefusedError)) throw err;
      return fresh('refused', err);
    }
  }

  #restore(actor: LiveActor<Env>, { ref, body: bytes }: StoredSnapshot, upTo: Position) {
    const refuse = (reason: string) => new SnapshotRefusedError(actor.def.name, ref, reason);
    // A flipped byte must not pass as the state of an actor.
    if (sha256Hex(bytes) !== ref.hash) throw refuse('its body is corrupt: it no longer hashes to the sha256 recorded with it');
    let text: string;
    try {
      text = decodeBody(bytes);
    } catch (err) {
      throw refuse(`its body cannot be read: ${(err as Error).message}`);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw refuse('its body is not JSON');
    }
    const parsed = SnapshotBody.safeParse(raw);
    if (!parsed.success)
      throw refuse(`its body is not a snapshot (${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')})`);
    const body = parsed.data;
    if (body.runId !== this.#runId) throw refuse(`it belongs to run ${body.runId}`);
    // The same run on another log (its directory reused with another backend): its position
    // means nothing here.
    if (body.log !== this.#log.identity) throw refuse(`it was folded from another log (${body.log}), not from ${this.#log.identity}`);
    if (ref.position > upTo) throw refuse(`it is at a position past the log's head (${upTo})`);
    if (body.actor !== actor.def.name) throw refuse(`it holds the state of actor ${body.actor}`);
    if (body.position !== ref.position || body.version !== ref.version) throw refuse('its body disagrees with the checkpoint table');
    // Of this version, yet of another shape (written by code whose schema said the same but whose
    // state did not, or edited): refused before any of it becomes the actor's state.
    const checked = checkStoredState(actor.def.name, actor.schemas, body);
    if (!checked.ok) throw refuse(`its state does not match the schema: ${checked.reason}`);
    const { machine, index: indexData } = checked;
    try {
      const fold = this.#newFold(actor, machine);
      const index = actor.def.index ? actor.def.index.restore!(indexData, this.#snapshots!.table.side(actor.def.name), this.#readAt) : undefined;
      const lastRead = body.lastRead ? { position: asPosition(body.lastRead.position), commitId: body.lastRead.commitId } : undefined;
      return { fold, index, lastRead };
    } catch (err) {
      throw refuse(`its state does not restore (${(err as Error).message})`);
    }
  }

  /** A fold of the actor's machine, fresh or from a persisted state already checked. */
  #newFold(actor: LiveActor<Env>, persisted?: Record<string, unknown>): ActorFold<AnyStateMachine> {
    return new ActorFold(actor.def.machine, persisted, { oncePerCommit: actor.def.foldOncePerCommit ?? [] });
  }

  /** Folds (from, to] into each begun actor, in one read from the earliest, then makes them live.
   * With snapshots on, each begun actor is snapshotted as the live run would be, every `every`
   * events read: its side index then holds one interval of results, not the whole run's (a
   * full-size run refolded from the start would not fit in memory otherwise). Counted in events,
   * not positions: a JetStream position is a message's sequence times 65,536, so a distance in
   * positions would make every commit due. */
  async #foldInto(begun: Begun<Env>[], to: Position): Promise<void> {
    const after = begun.reduce<Position>((min, b) => (b.report.from < min ? b.report.from : min), to);
    const every = this.#snapshots?.every ?? 0;
    // Per actor: the position of its last snapshot, and the last event it folded. A snapshot that
    // is due waits for the actor's next commit: one taken between two events of a commit would
    // fold the commit's second `once` event again after a restore (lastOnce is not kept).
    const saving = new Map(begun.map((b) => [b, { since: 0, due: false, last: null as EventEnvelope | null }]));
    if (after < to) {
      const types = new Set<string>();
      for (const b of begun) for (const t of b.actor.types) types.add(t);
      for await (const page of this.#pages({ after, to }, { runId: this.#runId, types: [...types] })) {
        for (const envelope of page) {
          this.#saw(envelope);
          for (const b of begun) {
            if (envelope.position <= b.report.from) continue;
            const s = saving.get(b)!;
            // Every event read counts, as the live run counts them (its own types or not).
            s.since++;
            if (!b.actor.types.has(envelope.type)) continue;
            // Due and at rest (as the live run would wait), or due long enough.
            if (s.due && s.last && s.last.commitId !== envelope.commitId && (atRest(b.actor, b.fold.snapshot) || s.since >= 2 * every)) {
              this.#save([{ actor: b.actor, fold: b.fold, index: b.index }], s.last.position, s.last);
              s.since = 0;
              s.due = false;
            }
            this.#fold(b.actor, b.fold, b.index, envelope);
            b.report.eventsFolded++;
            s.last = envelope;
            if (every > 0 && b.actor.snapshottable && s.since >= every) s.due = true;
          }
        }
      }
    }
    for (const b of begun) {
      b.actor.fold = b.fold;
      b.actor.index = b.index;
      this.#onRestart?.(b.report);
    }
  }

  /**
   * Runs until no live actor has work and no new event arrives, or until `shouldStop`.
   * Returns true when it stopped because everything was done.
   */
  async run(hooks: RuntimeHooks = {}): Promise<boolean> {
    for (;;) {
      const folded = await this.#foldNewEvents();
      if (this.#snapshotDue()) this.#takeSnapshots();
      const ran = await this.#runPendingEffects();
      await hooks.onStep?.(this.#position);
      if (hooks.shouldStop?.()) return false;
      if (!folded && !ran && !(await hooks.onIdle?.())) return true;
    }
  }

  // One actor per process (src/workers): the caller folds, picks the work and appends each
  // output as soon as its effect finishes, instead of `run()`'s steps.

  /** Folds the events appended since the last fold (taking snapshots as configured); true when
   * there were any. */
  async foldNew(): Promise<boolean> {
    const folded = await this.#foldNewEvents();
    if (this.#snapshotDue()) this.#takeSnapshots();
    return folded;
  }

  /** The actor's pending work as of the last fold ([] when it is not alive). */
  pendingOf(name: string): readonly Effect[] {
    const actor = this.#require(name);
    return actor.fold === null ? [] : actor.def.pending(actor.fold.snapshot);
  }

  /** The actor's side index (undefined when it keeps none or is not alive). */
  indexOf(name: string): unknown {
    return this.#require(name).index;
  }

  /** Does one effect of the actor under the run's retry policy (each failed try recorded; see
   * effect-runner.ts) and returns its output as the commit to append (under the same commit id
   * `run()` uses), without appending it. */
  async runEffect(name: string, effect: Effect): Promise<CommitRequest> {
    const actor = this.#require(name);
    const snapshot = actor.fold?.snapshot ?? null;
    if (snapshot === null) throw new ActorFailedError(name, effect.key, new Error('the actor is not alive'));
    return this.#runner.run(this.#task({ actor, effect, snapshot }), String(this.#position));
  }

  /** The commit id of an actor's output for the work named `key`. */
  commitIdOf(name: string, key: string): string {
    return this.#runner.commitIdOf(name, key);
  }

  /** Runs work of an actor that is a share of one of its effects (a worker's one program of a
   * request), named `key`, under the same retry policy and failure records as its effects. */
  async runWorkOf(name: string, key: string, run: () => Promise<NewEvent[]>): Promise<CommitRequest> {
    const def = this.#require(name).def;
    const task: EffectTask<Effect, Env> = { actor: name, effect: { key }, env: this.#env, run };
    if (def.failureEvent) task.failureEvent = (e, f, env) => def.failureEvent!(e, f, env);
    return this.#runner.run(task, String(this.#position));
  }

  snapshotOf(name: string): SnapshotFrom<AnyStateMachine> | null {
    return this.#require(name).fold?.snapshot ?? null;
  }

  #require(name: string): LiveActor<Env> {
    const actor = this.#actors.get(name);
    if (!actor) throw new Error(`no actor named ${name}`);
    return actor;
  }

  /** Folds one event into an actor: its side index observes it, its machine takes it. */
  #fold(actor: LiveActor<Env>, fold: ActorFold<AnyStateMachine>, index: unknown, envelope: EventEnvelope): void {
    actor.def.index?.observe(index, envelope);
    try {
      fold.fold(envelope);
    } catch (err) {
      if (!(err instanceof FoldError)) throw err;
      throw new ActorFailedError(actor.def.name, `fold of ${envelope.type} at ${envelope.position}`, err.cause);
    }
  }

  async #foldNewEvents(): Promise<boolean> {
    // Asked beside the read; answered before any of it is folded. Every fold asks: a reader that
    // asked less often could read dropped messages and then their replacements between two
    // asks, and never see the change.
    let answer: Promise<unknown> | null = this.#askLastRead();
    let any = false;
    const live = [...this.#actors.values()];
    for await (const page of this.#pages({ after: this.#position }, { runId: this.#runId })) {
      if (answer) {
        await this.#throwIfAnswered(answer);
        answer = null;
      }
      for (const envelope of page) {
        for (const view of this.#views) if (view.types.includes(envelope.type)) view.observe(envelope);
        for (const actor of live) {
          if (actor.fold !== null && actor.types.has(envelope.type)) this.#fold(actor, actor.fold, actor.index, envelope);
        }
        this.#position = envelope.position;
        this.#saw(envelope);
        this.#folded++;
        any = true;
      }
    }
    if (answer) await this.#throwIfAnswered(answer);
    return any;
  }

  /** Events a page at a time where the log offers it: one await per page, not per event. */
  async *#pages(range: ReadRange, filter: ReadFilter): AsyncIterable<readonly EventEnvelope[]> {
    if (this.#log.readPages) {
      yield* this.#log.readPages(range, filter);
      return;
    }
    for await (const envelope of this.#log.read(range, filter)) yield [envelope];
  }

  /** Snapshots not taken because the actor's state was too large to serialize. */
  readonly snapshotsSkipped: { actor: string; position: Position }[] = [];

  /** Whether the live actors' snapshots are to be taken now (see SnapshotOptions.every). */
  #snapshotDue(): boolean {
    const every = this.#snapshots?.every ?? 0;
    const since = this.#folded - this.#snapshotAt;
    if (every <= 0 || since < every) return false;
    if (since >= 2 * every) return true;
    for (const actor of this.#actors.values()) if (actor.snapshottable && actor.fold !== null && !atRest(actor, actor.fold.snapshot)) return false;
    return true;
  }

  /** Stores a snapshot of every live, snapshottable actor at the dispatcher's position. */
  #takeSnapshots(): void {
    const live = [...this.#actors.values()].filter((a) => a.snapshottable && a.fold !== null);
    this.#save(
      live.map((actor) => ({ actor, fold: actor.fold!, index: actor.index })),
      this.#position,
      this.#lastRead,
    );
    this.#snapshotAt = this.#folded;
  }

  /** Stores the given actors' states as their snapshots at `position`, all in one transaction;
   * each index is then told its side rows are saved (and may drop them from memory). */
  #save(
    states: readonly { actor: LiveActor<Env>; fold: ActorFold<AnyStateMachine>; index: unknown }[],
    position: Position,
    lastRead: { position: Position; commitId: string } | null,
  ): void {
    const taken: { stored: StoredSnapshot; index: unknown }[] = [];
    for (const { actor, fold, index } of states) {
      const body: SnapshotBody = {
        format: SNAPSHOT_FORMAT,
        runId: this.#runId,
        log: this.#log.identity,
        actor: actor.def.name,
        version: actor.version,
        position,
        ...(lastRead ? { lastRead: { position: lastRead.position, commitId: lastRead.commitId } } : {}),
        ...this.#persisted(actor, fold, index),
      };
      let text: string;
      try {
        text = JSON.stringify(body);
      } catch (err) {
        // An index past what one string can hold (~512 MB: every verdict of a run of a few
        // million results) cannot be written this way: the actor keeps its last snapshot and
        // a restart folds more, rather than the run failing.
        if (!(err instanceof RangeError)) throw err;
        this.snapshotsSkipped.push({ actor: actor.def.name, position });
        continue;
      }
      const bytes = encodeBody(text);
      const side = actor.def.index?.sideRows?.(index);
      taken.push({
        stored: { ref: { actor: actor.def.name, position, version: actor.version, hash: sha256Hex(bytes) }, body: bytes, ...(side ? { side } : {}) },
        index,
      });
    }
    this.#snapshots!.table.save(taken.map((t) => t.stored));
    for (const { stored, index } of taken) {
      if (stored.side) this.#actors.get(stored.ref.actor)!.def.index?.sideSaved?.(index, this.#snapshots!.table.side(stored.ref.actor));
    }
  }

  async #runPendingEffects(): Promise<boolean> {
    const pending: Work<Env>[] = [];
    for (const actor of this.#actors.values()) {
      if (actor.fold === null) continue;
      const snapshot = actor.fold.snapshot;
      for (const effect of actor.def.pending(snapshot)) {
        pending.push({ actor, effect, snapshot });
      }
    }
    if (pending.length === 0) return false;
    const work = this.#scheduler.pick(pending);
    // Every effect of the step is settled before the step ends, so none is still writing
    // failure records after the run has stopped.
    const at = String(this.#position);
    const settled = await Promise.allSettled(work.map((w) => this.#runner.run(this.#task(w), at)));
    // Appended in the scheduler's order (by default the order the work was listed), whatever
    // order it finished in.
    const commits: StepCommit<Env>[] = [];
    settled.forEach((o, i) => {
      if (o.status === 'rejected') throw o.reason;
      commits.push({ work: work[i]!, commit: o.value });
    });
    const results = await this.#appendStep(this.#scheduler.order(commits));
    const wroteAny = results.some((r) => !r.duplicate);
    // Every output was already in the log yet the work is still pending: the actor's machine
    // does not recognise its own outputs, and looping would never end.
    if (!wroteAny) throw new ActorFailedError(work[0]!.actor.def.name, work[0]!.effect.key, new Error('effect stays pending after its output was recorded'));
    return true;
  }

  /** One piece of work as the effect runner takes it. */
  #task(w: Work<Env>): EffectTask<Effect, Env> {
    const def = w.actor.def;
    return {
      actor: def.name,
      effect: w.effect,
      env: this.#env,
      run: () => def.run(w.effect, this.#env, w.snapshot, w.actor.index),
      ...(def.failureEvent ? { failureEvent: (e: Effect, f: EffectFailure, env: Env) => def.failureEvent!(e, f, env) } : {}),
    };
  }

  /** One step's commits: in one transaction where the log offers it (each commit stays
   * all-or-nothing and every one is durable before anything acts on it); else, or when that
   * transaction fails, one by one, each retried: a commit appended before a failure is a
   * duplicate the next time, and a duplicate is success. */
  async #appendStep(commits: readonly StepCommit<Env>[]): Promise<AppendResult[]> {
    if (this.#log.appendCommits && commits.length > 1) {
      try {
        return await this.#log.appendCommits(commits.map((c) => c.commit));
      } catch {
        // Nothing of the transaction was written; appending one by one names the failing commit.
      }
    }
    const results: AppendResult[] = [];
    for (const c of commits) {
      for (let attempt = 1; ; attempt++) {
        try {
          results.push(await this.#log.append(c.commit.stream, c.commit.events, c.commit.options));
          break;
        } catch (error) {
          await this.#runner.failed(this.#task(c.work), attempt, error, String(this.#position));
        }
      }
    }
    return results;
  }

  /** Failure records the log refused (it was failing too), most recent last. */
  get unrecordedFailures(): readonly string[] {
    return this.#runner.unrecordedFailures;
  }
}

interface Work<Env> {
  actor: LiveActor<Env>;
  effect: Effect;
  snapshot: SnapshotFrom<AnyStateMachine>;
}

interface StepCommit<Env> {
  work: Work<Env>;
  commit: CommitRequest;
}
