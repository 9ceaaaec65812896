/**
 * The one way an actor's effect is run, wherever it runs: by the in-process runtime's steps, by
 * a worker process, or by an ablation that executes a variant's programs. An effect is tried up
 * to the retry policy's limit; each failed try is recorded in the log (the actor's own failure
 * event, or EffectFailed) before the next, after a backoff; past the limit RunFailed is recorded
 * and the run stops with RunFailedError. The output becomes one commit under the effect's commit
 * id, the same in every process, so a commit retried anywhere is a duplicate, not a second one.
 */
import type { CommitRequest, EventLog } from '../events/log.js';
import type { NewEvent } from '../events/envelope.js';
import {
  DEFAULT_RETRY,
  RunFailedError,
  backoffAfter,
  certainToRepeat,
  effectFailedEvent,
  errorText,
  failureCommitId,
  runFailedCommitId,
  sleep,
  type EffectFailure,
  type RetryPolicy,
} from './effect-failures.js';
import { ActorFailedError } from './errors.js';

export { ActorFailedError };

/** What an effect needs to run: the actor's `run` and, optionally, its own failure event. */
export interface EffectTask<E extends { key: string }, Env> {
  actor: string;
  effect: E;
  run(): Promise<NewEvent[]>;
  failureEvent?(effect: E, failure: EffectFailure, env: Env): NewEvent | null;
  env: Env;
}

export class EffectRunner {
  readonly #log: EventLog;
  readonly #runId: string;
  readonly #retry: RetryPolicy;
  readonly #unrecorded: string[] = [];
  #runFailedWritten = false;

  constructor(log: EventLog, runId: string, retry: RetryPolicy = DEFAULT_RETRY) {
    if (!(Number.isInteger(retry.attempts) && retry.attempts >= 1)) throw new RangeError(`retry.attempts must be a whole number >= 1, got ${retry.attempts}`);
    this.#log = log;
    this.#runId = runId;
    this.#retry = retry;
  }

  /** The commit id of an actor's output for the work named `key`. */
  commitIdOf(actor: string, key: string): string {
    return `${this.#runId}/${actor}/${key}`;
  }

  /** Runs the effect under the retry policy; -> its output as the commit to append (not
   * appended). `at` tells this process's tries apart from another's (a log position): tried
   * again after a restart, the same effect fails at attempt 1 again. */
  async run<E extends { key: string }, Env>(task: EffectTask<E, Env>, at: string): Promise<CommitRequest> {
    let output: NewEvent[] | undefined;
    for (let attempt = 1; output === undefined; attempt++) {
      try {
        output = await task.run();
      } catch (error) {
        await this.failed(task, attempt, error, at);
      }
    }
    if (output.length === 0) throw new ActorFailedError(task.actor, task.effect.key, new Error('effect produced no event'));
    const events = output.map((e) => (e.runId === undefined ? { ...e, runId: this.#runId } : e));
    return { stream: task.actor, events, options: { commitId: this.commitIdOf(task.actor, task.effect.key) } };
  }

  /** Records a failed try of the task (its effect or the append of its output); waits before
   * the next one, or past the limit records RunFailed and throws RunFailedError. A record that
   * cannot be written (the log itself is failing) is not waited for: the error that stops the
   * run says what failed. */
  async failed<E extends { key: string }, Env>(task: Omit<EffectTask<E, Env>, 'run'>, attempt: number, error: unknown, at: string): Promise<void> {
    const name = task.actor;
    const key = task.effect.key;
    const willRetry = attempt < this.#retry.attempts && !certainToRepeat(error);
    const failure: EffectFailure = { actor: name, effectKey: key, attempt, willRetry, error };
    let record: NewEvent;
    try {
      record = task.failureEvent?.(task.effect, failure, task.env) ?? effectFailedEvent(this.#runId, failure);
    } catch {
      record = effectFailedEvent(this.#runId, failure);
    }
    await this.#tryAppend(name, [{ ...record, runId: this.#runId }], failureCommitId(this.#runId, name, `${key}@${at}`, attempt));
    if (willRetry) {
      await sleep(backoffAfter(this.#retry, attempt));
      return;
    }
    const stopped = new RunFailedError(name, key, attempt, error);
    // One RunFailed per stop, though other effects of a step may reach their limit too.
    if (this.#runFailedWritten) throw stopped;
    this.#runFailedWritten = true;
    const refused = await this.#tryAppend(
      name,
      [{ type: 'RunFailed', runId: this.#runId, data: { reason: stopped.message } }],
      runFailedCommitId(this.#runId, name, `${key}@${at}`),
    );
    throw refused === null ? stopped : new RunFailedError(name, key, attempt, error, refused);
  }

  /** Appends a failure record; returns why the log refused it, or null. */
  async #tryAppend(stream: string, events: NewEvent[], commitId: string): Promise<string | null> {
    try {
      await this.#log.append(stream, events, { commitId });
      return null;
    } catch (err) {
      const why = errorText(err);
      this.#unrecorded.push(`${commitId}: ${why}`);
      return why;
    }
  }

  /** Failure records the log refused (it was failing too), most recent last. */
  get unrecordedFailures(): readonly string[] {
    return this.#unrecorded;
  }
}
