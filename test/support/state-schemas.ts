/**
 * Every live actor's state, as a snapshot would store it, checked against its schemas: a schema
 * stricter than what a method's run folds would refuse that method's snapshots and refold.
 */
import { expect } from 'vitest';
import { stateSchemasOf, type ActorRuntime } from '../../src/actors/runtime.js';
import { checkStoredState } from '../../src/actors/snapshot-schema.js';
import { conductor } from '../../src/actors/conductor.js';
import { solver } from '../../src/actors/solver.js';
import { adversary } from '../../src/actors/adversary.js';
import { executor } from '../../src/actors/executor.js';
import { judge } from '../../src/actors/judge.js';
import { learner } from '../../src/actors/learner.js';

const ACTORS = [conductor, solver, adversary, executor, judge, learner];

export function expectStatesMatchSchemas(runtime: ActorRuntime<unknown>): void {
  for (const actor of ACTORS) {
    const state = runtime.persistedStateOf(actor.name);
    if (state === null) continue;
    // As stored: through JSON, as a snapshot body is.
    const body = JSON.parse(JSON.stringify(state)) as { machine: Record<string, unknown>; index: unknown };
    const checked = checkStoredState(actor.name, stateSchemasOf(actor as never), body);
    expect(checked.ok ? null : checked.reason, actor.name).toBeNull();
  }
}
