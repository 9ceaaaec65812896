/**
 * What an actor's snapshot must agree with, from the code itself: the zod schemas of its
 * machine context and of its side index's serialized data, and its machine's shape. The version
 * of its snapshots is a digest of them, so a change to any of them sets a new version and older
 * snapshots are ignored without a number to bump by hand; and a stored state is checked against
 * the schemas when it is restored, so one of another shape is refused rather than cast.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { unpackJson, type Json } from '../events/packed-json.js';
import { SNAPSHOT_FORMAT } from './snapshots.js';

/** The schemas that describe an actor's stored state. */
export interface StateSchemas {
  /** Its machine's context. */
  readonly context: z.ZodType;
  /** Its side index's serialized data, when it keeps one. */
  readonly index?: z.ZodType;
  /** The contexts of the child machines it spawns, by the name they are spawned under. */
  readonly children?: Readonly<Record<string, z.ZodType>>;
}

/** The JSON Schema of a zod schema as canonical text: two schemas that accept the same data in
 * the same way give the same text, whatever their declaration order in the source. */
function schemaText(schema: z.ZodType): string {
  return JSON.stringify(z.toJSONSchema(schema, { unrepresentable: 'any' }));
}

/**
 * The version of an actor's snapshots: the snapshot format, then a digest of the machine's shape
 * (state ids, event types; see shapeOf in runtime.ts) and of the JSON Schemas of its state. The
 * code's release version is not part of it: a release that changes no schema and no shape reads
 * the snapshots of the one before.
 */
export function snapshotVersion(shape: readonly string[], schemas: StateSchemas): string {
  const hash = createHash('sha256').update(shape.join('\n'));
  hash.update(`\ncontext ${schemaText(schemas.context)}`);
  if (schemas.index) hash.update(`\nindex ${schemaText(schemas.index)}`);
  for (const [src, schema] of Object.entries(schemas.children ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) hash.update(`\nchild ${src} ${schemaText(schema)}`);
  return `${SNAPSHOT_FORMAT}/${hash.digest('hex').slice(0, 12)}`;
}

const StateValue: z.ZodType = z.union([
  z.string(),
  z.record(
    z.string(),
    z.lazy(() => StateValue),
  ),
]);

/** xstate's persisted snapshot of a child machine the actor spawned, its context apart (see
 * StateSchemas.children): children spawn none of their own. */
const PersistedChild = z.strictObject({
  snapshot: z.object({
    status: z.enum(['active', 'done']),
    value: StateValue,
    historyValue: z.record(z.string(), z.unknown()),
    children: z.strictObject({}),
    context: z.unknown(),
  }),
  src: z.string(),
  systemId: z.string().optional(),
  syncSnapshot: z.boolean().optional(),
});

/** xstate's persisted snapshot of a machine, its context and its children's contexts apart (see
 * StateSchemas): the actors' machines end in a final state at most. */
export const PersistedMachine = z.object({
  status: z.enum(['active', 'done']),
  value: StateValue,
  historyValue: z.record(z.string(), z.unknown()),
  children: z.record(z.string(), PersistedChild),
  context: z.unknown(),
});

/** The result of checking stored state against its schema: the parsed data, or why it does not
 * match (the first failing path, and how many issues there are in all). */
export type Checked = { ok: true; data: unknown } | { ok: false; reason: string };

export function checkState(what: string, schema: z.ZodType, data: unknown): Checked {
  const parsed = schema.safeParse(data);
  if (parsed.success) return { ok: true, data: parsed.data };
  const issues = parsed.error.issues;
  const first = issues[0]!;
  const at = [what, ...first.path.map(String)].join('.');
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  return { ok: false, reason: `${at}: ${first.message}${more}` };
}

/** A stored state whose parts match the schemas, as they parsed it (the index unpacked, see
 * packed-json.ts), or why not. */
export type CheckedState = { ok: true; machine: Record<string, unknown>; index: unknown } | { ok: false; reason: string };

/** Checks a snapshot body's machine state (xstate's fields and the context) and index data
 * against an actor's schemas, in that order; the reason names the first path that fails. */
export function checkStoredState(actor: string, schemas: StateSchemas, body: { machine: Record<string, unknown>; index: unknown }): CheckedState {
  const persisted = checkState(`${actor}.machine`, PersistedMachine, body.machine);
  if (!persisted.ok) return persisted;
  const context = checkState(`${actor}.context`, schemas.context, body.machine.context);
  if (!context.ok) return context;
  const children: Record<string, unknown> = {};
  for (const [id, child] of Object.entries((persisted.data as z.infer<typeof PersistedMachine>).children)) {
    const schema = schemas.children?.[child.src];
    if (!schema) return { ok: false, reason: `${actor}.children.${id}: a child of unknown kind ${child.src}` };
    const checked = checkState(`${actor}.children.${id}.context`, schema, child.snapshot.context);
    if (!checked.ok) return checked;
    children[id] = { ...child, snapshot: { ...child.snapshot, context: checked.data } };
  }
  const machine = { ...(persisted.data as Record<string, unknown>), context: context.data, children };
  if (!schemas.index) return { ok: true, machine, index: body.index };
  let unpacked: unknown;
  try {
    unpacked = unpackJson(body.index as Json);
  } catch (err) {
    return { ok: false, reason: `${actor}.index does not unpack (${(err as Error).message})` };
  }
  const index = checkState(`${actor}.index`, schemas.index, unpacked);
  return index.ok ? { ok: true, machine, index: index.data } : index;
}
