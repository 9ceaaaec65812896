/**
 * Snapshot versions from schemas: an actor's snapshot version follows from its context schema,
 * its index schema and its machine's shape, so a change to any of them sets another version and
 * equal schemas give the same one; a stored state is checked against the schemas, the first
 * failing path named.
 */
import { describe, expect, it } from 'vitest';
import { initialTransition } from 'xstate';
import { z } from 'zod';
import { checkState, checkStoredState, snapshotVersion } from '../../src/actors/snapshot-schema.js';
import { ActorFold } from '../../src/actors/actor-fold.js';
import { ProblemRound } from '../../src/actors/judge-state.js';
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

  it("a change to a child machine's schema (the Judge's problem-rounds) or to the index's schema sets another version", () => {
    const children = { problemRound: ProblemRound };
    const nested = { problemRound: ProblemRound.extend({ phase: z.string() }) };
    expect(snapshotVersion(SHAPE, { context: JudgeContext, children: nested })).not.toBe(snapshotVersion(SHAPE, { context: JudgeContext, children }));
    expect(snapshotVersion(SHAPE, { context: JudgeContext, children })).not.toBe(snapshotVersion(SHAPE, { context: JudgeContext }));
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
    context.mistakeBooks = { p: { entries: [{ testKey: 1 }] } };
    const checked = checkState('judge.context', judge.context, context);
    expect(checked.ok).toBe(false);
    expect(!checked.ok && checked.reason).toMatch(/^judge\.context\.mistakeBooks\.p\.entries\.0\.testKey: .*string.*\(and \d+ more\)$/);
    expect(checkState('judge.context', judge.context, { ...context, mistakeBooks: {}, extra: 1 })).toEqual({
      ok: false,
      reason: expect.stringMatching(/^judge\.context: .*extra/),
    });
  });
});

describe("a stored state with child machines (the Judge's open problem-rounds)", () => {
  const schemas = { context: judge.context, children: { problemRound: ProblemRound } };
  const envelope = (type: string, data: unknown, n: number) =>
    ({ id: `e${n}`, type, v: 1, runId: 'r', stream: 't', position: n, commitId: `c${n}`, causationId: null, correlationId: null, at: '', data }) as never;
  /** A Judge with one problem-round open, as its snapshot stores it. */
  function persisted() {
    const fold = new ActorFold(judge.machine);
    fold.fold(envelope('ProblemScheduled', { round: 1, problemId: 'p', groupSize: 2, testVersion: 0, codeVersion: 0 }, 1));
    return JSON.parse(JSON.stringify(fold.persisted())) as { children: Record<string, { snapshot: { context: Record<string, unknown> } }> };
  }

  it('restores with each child in its state', () => {
    const machine = persisted();
    const checked = checkStoredState('judge', schemas, { machine, index: null });
    expect(checked.ok).toBe(true);
    const restored = new ActorFold(judge.machine, checked.ok ? checked.machine : undefined);
    const round = restored.snapshot.children['1/p'] as { getSnapshot(): { value: unknown; context: { groupSize: number } } };
    expect(round.getSnapshot().value).toBe('sampling');
    expect(round.getSnapshot().context.groupSize).toBe(2);
  });

  it("a child's context of another shape is refused, its path named; a child of an unknown kind too", () => {
    const machine = persisted();
    machine.children['1/p']!.snapshot.context.round = 'one';
    const checked = checkStoredState('judge', schemas, { machine, index: null });
    expect(checked).toEqual({ ok: false, reason: expect.stringMatching(/^judge\.children\.1\/p\.context\.round: /) });
    expect(checkStoredState('judge', { context: judge.context }, { machine: persisted(), index: null })).toEqual({
      ok: false,
      reason: expect.stringMatching(/^judge\.children\.1\/p: a child of unknown kind problemRound/),
    });
  });
});
