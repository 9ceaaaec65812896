/**
 * What the runtime does when an effect throws: it records the failure as an event, waits, and
 * tries again, up to a limit; past the limit it records `RunFailed` and stops the run with a
 * `RunFailedError`. Failures are events, not lost stack traces, so a report (and a person) sees
 * every one, and a resumed run starts with the same log of what went wrong.
 *
 * Retrying is safe because every output is appended under a commit id derived from its effect:
 * an output appended before a failure is a duplicate the second time, and a duplicate is success.
 */
import type { NewEvent } from '../events/envelope.js';
import { CommitTooLargeError, DuplicateEventIdError, EmptyCommitError, LogClosedError, MalformedEventError, UnknownEventTypeError } from '../events/errors.js';
import { backoffMs } from '../core/backoff.js';

export interface RetryPolicy {
  /** Tries of one effect in all (1: no retry). */
  readonly attempts: number;
  /** Wait before the second try; doubled for each try after it, up to `maxBackoffMs`. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, backoffMs: 250, maxBackoffMs: 8_000 };

/** The wait after the `failed`-th failed try (1-based). Pure, so tests can check the schedule. */
export function backoffAfter(policy: RetryPolicy, failed: number): number {
  return backoffMs(policy.backoffMs, policy.maxBackoffMs, failed);
}

/** One failed try of an effect, as an actor may describe it in its own terms. */
export interface EffectFailure {
  actor: string;
  effectKey: string;
  /** 1-based. */
  attempt: number;
  /** Whether the runtime will try again. */
  willRetry: boolean;
  error: unknown;
}

/** Errors that the same try would meet again (an output the catalog refuses, a closed log):
 * recorded once, not retried. */
export function certainToRepeat(error: unknown): boolean {
  return [MalformedEventError, UnknownEventTypeError, DuplicateEventIdError, EmptyCommitError, CommitTooLargeError, LogClosedError].some(
    (c) => error instanceof c,
  );
}

export function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
  return text.trim() === '' ? 'an error without a message' : text;
}

/** The generic record of a failed try; actors with a failure event of their own (the Learner's
 * TrainingStepFailed) describe it themselves. */
export function effectFailedEvent(runId: string, f: EffectFailure): NewEvent {
  return {
    type: 'EffectFailed',
    runId,
    data: { actor: f.actor, effectKey: f.effectKey, attempt: f.attempt, willRetry: f.willRetry, error: errorText(f.error) },
  };
}

/** The commit id of a failure record: one per try, so recording it again after a crash is a
 * duplicate, not a second record. */
export const failureCommitId = (runId: string, actor: string, effectKey: string, attempt: number) => `${runId}/${actor}/${effectKey}/failed/${attempt}`;
export const runFailedCommitId = (runId: string, actor: string, effectKey: string) => `${runId}/${actor}/${effectKey}/run-failed`;

/** The run stopped because an effect failed on every try; `RunFailed` is in the log. */
export class RunFailedError extends Error {
  constructor(
    readonly actor: string,
    readonly effectKey: string,
    readonly attempts: number,
    cause: unknown,
    /** Why RunFailed could not be written (the log was failing too); null when it was. */
    readonly unrecorded: string | null = null,
  ) {
    super(
      `the run failed: actor ${actor} failed on ${effectKey} ${attempts === 1 ? 'once' : `${attempts} times`} (the retry limit); last error: ${errorText(cause)}` +
        (unrecorded ? `; RunFailed could not be recorded: ${unrecorded}` : ''),
      { cause },
    );
    this.name = 'RunFailedError';
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
