/**
 * Snapshot versions from schemas: an actor's snapshot version follows from its context schema,
 * its index schema and its machine's shape, so a change to any of them sets another version and
 * equal schemas give the same one; a stored state is checked against the schemas, the first
 * failing path named.
 */
import { describe, expect, it } from 'vitest';
import { initialTransition } from 'xstate';
import { z } from 'zod';
import { checkState, snapshotVersion } from '../../src/actors/snapshot-schema.js';
import { conductor } from '../../src/actors/conductor.js';
import { solver } from '../../src/actors/solver.js';
import { adversary } from '../../src/actors/adversary.js';
import { executor } from '../../src/actors/executor.js';
import { JudgeContext, judge } from '../../src/actors/judge.js';
import { learner } from '../../src/actors/learner.js';

const ACTORS = [conductor, solver, adversary, executor, judge, learner];
const SHAPE = ['actor judge', 'state judge'];

type ObjectSchema = z.ZodObject<z.ZodRawShape>;
const contextOf = (a: (typeof ACTORS)[number]) => a.context as unknown as ObjectSchema;

describe('snapshot versions', () => {
  it('equal schemas give the same version, however they were built', () => {
    const a = z.strictObject({ n: z.int(), s: z.array(z.string()) });
    const b = z.strictObject({ n: z.int(), s: z.string().array() });
    expect(snapshotVersion(SHAPE, { context: a })).toBe(snapshotVersion(SHAPE, { context: b }));
    expect(snapshotVersion(SHAPE, { context: JudgeContext })).toBe(snapshotVersion(SHAPE, { context: JudgeContext }));
    // The snapshot format first, then the digest: the form the checkpoint table has always held.
    expect(snapshotVersion(SHAPE, { context: a })).toMatch(/^\d+\/[0-9a-f]{12}$/);
  });

  it("a field added, renamed or of another type in any actor's context sets another version", () => {
    for (const actor of ACTORS) {
      const context = contextOf(actor);
      const version = snapshotVersion(SHAPE, { context });
      const [first] = Object.keys(context.shape);
      expect(first, actor.name).toBeDefined();
      const changed = {
        added: context.extend({ addedField: z.string() }),
        renamed: context.omit({ [first!]: true } as never).extend({ [`${first}Renamed`]: context.shape[first!]! }),
        retyped: context.extend({ [first!]: z.tuple([z.string(), z.string()]) }),
        dropped: context.omit({ [first!]: true } as never),
      };
      for (const [how, schema] of Object.entries(changed)) expect(snapshotVersion(SHAPE, { context: schema }), `${actor.name}: ${how}`).not.toBe(version);
    }
  });

  it("a change to a nested schema (the Judge's problem-rounds) or to the index's schema sets another version", () => {
    const open = JudgeContext.shape.open.valueType as unknown as ObjectSchema;
    const nested = JudgeContext.extend({ open: z.record(z.string(), open.extend({ phase: z.string() })) });
    expect(snapshotVersion(SHAPE, { context: nested })).not.toBe(snapshotVersion(SHAPE, { context: JudgeContext }));
    const index = judge.index!.schema! as unknown as ObjectSchema;
    const withIndex = snapshotVersion(SHAPE, { context: JudgeContext, index });
    expect(withIndex).not.toBe(snapshotVersion(SHAPE, { context: JudgeContext }));
    expect(snapshotVersion(SHAPE, { context: JudgeContext, index: index.extend({ more: z.int() }) })).not.toBe(withIndex);
  });

  it("a change to the machine's shape sets another version", () => {
    expect(snapshotVersion([...SHAPE, 'state judge.done'], { context: JudgeContext })).not.toBe(snapshotVersion(SHAPE, { context: JudgeContext }));
  });
});

describe('checking a stored state', () => {
  it("every actor's initial context matches its schema", () => {
    for (const actor of ACTORS) {
      const context = initialTransition(actor.machine)[0].context;
      expect(checkState(actor.name, actor.context, JSON.parse(JSON.stringify(context))), actor.name).toEqual({ ok: true, data: context });
    }
  });

  it('a mismatch names the first failing path and how many more there are', () => {
    const context = JSON.parse(JSON.stringify(initialTransition(judge.machine)[0].context)) as Record<string, unknown>;
    context.open = { '1/p': { key: '1/p', round: 'one' } };
    const checked = checkState('judge.context', judge.context, context);
    expect(checked.ok).toBe(false);
    expect(!checked.ok && checked.reason).toMatch(/^judge\.context\.open\.1\/p\.round: .*number.*\(and \d+ more\)$/);
    expect(checkState('judge.context', judge.context, { ...context, open: {}, extra: 1 })).toEqual({
      ok: false,
      reason: expect.stringMatching(/^judge\.context: .*extra/),
    });
  });
});
