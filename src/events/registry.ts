import { createHash } from 'node:crypto';
/**
 * The mechanism behind the event catalog: per event type a current version, a zod schema for
 * its `data`, and upcasters that lift stored data of older versions one step at a time
 * (v1 -> v2 -> ...) when it is read. The log encodes on append and decodes on read through a
 * registry, so stored history never has to be rewritten when a schema evolves.
 */
import { z } from 'zod';
import type { EventEnvelope, NewEvent } from './envelope.js';
import { MalformedEventError, UnknownEventTypeError, UnsupportedEventVersionError, summarizeIssues, type EventLocation } from './errors.js';
import { packJson, unpackJson, type Json } from './packed-json.js';

/** Turns data of version k into data of version k + 1. Gets whatever was stored: check its shape. */
export type Upcaster = (data: unknown) => unknown;

export interface EventTypeSpec<S extends z.ZodType = z.ZodType> {
  /** Current version: what appends write and what reads return. */
  version: number;
  /** Schema of the current version's data. */
  schema: S;
  /** upcasters[k] lifts version k to k + 1. Versions below the lowest key are unsupported. */
  upcasters?: Readonly<Record<number, Upcaster>>;
  /** Stored at the current version in the packed form of packed-json.ts (lists as columns):
   * for types whose data is mostly lists of hashes and ids. Older versions are stored plain. */
  packed?: boolean;
}

/** Identity helper that keeps the schema's type for inference. */
export function defineEvent<S extends z.ZodType>(spec: EventTypeSpec<S>): EventTypeSpec<S> {
  if (!Number.isInteger(spec.version) || spec.version < 1) {
    throw new Error(`event version must be an integer >= 1, got ${spec.version}`);
  }
  for (const k of Object.keys(spec.upcasters ?? {})) {
    const from = Number(k);
    if (!Number.isInteger(from) || from < 1 || from >= spec.version) {
      throw new Error(`upcaster from v${k} does not fit current version v${spec.version}`);
    }
  }
  return spec;
}

export type Specs = Record<string, EventTypeSpec>;
export type TypeOf<D extends Specs> = keyof D & string;
export type DataOf<D extends Specs, T extends TypeOf<D>> = z.output<D[T]['schema']>;
export type DataInputOf<D extends Specs, T extends TypeOf<D>> = z.input<D[T]['schema']>;
/** A stored event of one (or, for a union T, any) type of the registry, with typed data. */
export type EnvelopeOf<D extends Specs, T extends TypeOf<D> = TypeOf<D>> = {
  [K in T]: EventEnvelope<K, DataOf<D, K>>;
}[T];

export interface EventOptions {
  id?: string;
  causationId?: string | null;
  correlationId?: string | null;
  at?: string;
}

/** What a log backend needs from a registry: encode on append, decode (upcast) on read. */
export interface EventCodec {
  has(type: string): boolean;
  types(): string[];
  currentVersion(type: string): number;
  encode(type: string, data: unknown, loc: EventLocation): { v: number; data: unknown };
  decode(type: string, v: number, data: unknown, loc: EventLocation): { v: number; data: unknown };
  /** What is stored for validated data of the current version (the data itself, or its packed form). */
  toStored?(type: string, data: unknown): unknown;
  /** The data a stored value of the current version stands for (undoes toStored; no validation). */
  fromStored?(type: string, stored: unknown, loc: EventLocation): unknown;
  /** A mark (1 .. 2^21-1) of the current schema of `type`, so a reader can tell that a stored
   * row was validated against the very schema it would use; null when none can be made. */
  schemaMark?(type: string): number | null;
}

export class EventRegistry<D extends Specs = Specs> implements EventCodec {
  readonly #specs: Map<string, EventTypeSpec>;
  readonly #marks = new Map<string, number | null>();

  constructor(readonly specs: D) {
    // Compiled once here: the fast path matters on replays of hundreds of thousands of events.
    this.#specs = new Map(Object.entries(specs).map(([type, spec]) => [type, { ...spec, schema: z.compile(spec.schema) }]));
  }

  /** A registry with more (or replaced) types; for tests and extensions. */
  extend<E extends Specs>(more: E): EventRegistry<Omit<D, keyof E> & E> {
    return new EventRegistry({ ...this.specs, ...more } as Omit<D, keyof E> & E);
  }

  has(type: string): type is TypeOf<D> {
    return this.#specs.has(type);
  }

  types(): string[] {
    return [...this.#specs.keys()];
  }

  currentVersion(type: string): number {
    const spec = this.#specs.get(type);
    if (!spec) throw new UnknownEventTypeError(type, undefined, {});
    return spec.version;
  }

  schemaMark(type: string): number | null {
    let mark = this.#marks.get(type);
    if (mark !== undefined) return mark;
    const spec = this.specs[type as keyof D] as EventTypeSpec | undefined;
    mark = null;
    if (spec) {
      try {
        // Refinements do not show in the JSON schema: a change to one alone needs a version bump,
        // as every schema change does.
        const text = `${type}@${spec.version}:${JSON.stringify(z.toJSONSchema(spec.schema, { unrepresentable: 'any', io: 'input' }))}`;
        const h = createHash('sha256').update(text).digest();
        mark = (h.readUInt32BE(0) % 0x1fffff) + 1;
      } catch {
        mark = null;
      }
    }
    this.#marks.set(type, mark);
    return mark;
  }

  /** Validates data for an append at the current version. Returns the parsed data (defaults applied). */
  encode(type: string, data: unknown, loc: EventLocation): { v: number; data: unknown } {
    const spec = this.#specs.get(type);
    if (!spec) throw new UnknownEventTypeError(type, undefined, loc);
    return { v: spec.version, data: this.#validate(spec, type, spec.version, data, loc) };
  }

  /** Upcasts stored data of version `v` to the current version and validates it. */
  decode(type: string, v: number, data: unknown, loc: EventLocation): { v: number; data: unknown } {
    const spec = this.#specs.get(type);
    if (!spec) throw new UnknownEventTypeError(type, v, loc);
    if (!Number.isInteger(v) || v < 1 || v > spec.version) {
      throw new UnsupportedEventVersionError(type, v, spec.version, loc);
    }
    let current = v === spec.version ? this.fromStored(type, data, loc) : data;
    for (let from = v; from < spec.version; from++) {
      const up = spec.upcasters?.[from];
      if (!up) throw new UnsupportedEventVersionError(type, v, spec.version, loc);
      current = up(current);
    }
    return { v: spec.version, data: this.#validate(spec, type, v, current, loc) };
  }

  toStored(type: string, data: unknown): unknown {
    return this.#specs.get(type)?.packed ? packJson(data as Json) : data;
  }

  fromStored(type: string, stored: unknown, loc: EventLocation): unknown {
    if (!this.#specs.get(type)?.packed) return stored;
    try {
      return unpackJson(stored as Json);
    } catch (err) {
      throw new MalformedEventError(
        type,
        this.currentVersion(type),
        [{ path: 'data', message: `packed data does not unpack (${(err as Error).message})` }],
        loc,
      );
    }
  }

  /** Builds a NewEvent with typed, validated data (errors surface at the writer, not at append). */
  make<T extends TypeOf<D>>(type: T, runId: string, data: DataInputOf<D, T>, opts: EventOptions = {}): NewEvent<T, DataOf<D, T>> {
    const parsed = this.encode(type, data, {}).data as DataOf<D, T>;
    return { ...opts, type, runId, data: parsed };
  }

  /** Type guard: narrows a stored event's data to its type's schema. */
  is<T extends TypeOf<D>>(event: EventEnvelope, type: T): event is EnvelopeOf<D, T> {
    return event.type === type;
  }

  #validate(spec: EventTypeSpec, type: string, storedV: number, data: unknown, loc: EventLocation): unknown {
    const r = spec.schema.safeParse(data);
    if (!r.success) throw new MalformedEventError(type, storedV, summarizeIssues(r.error.issues, 'data'), loc);
    return r.data;
  }
}
