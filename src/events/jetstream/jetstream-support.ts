/**
 * Small JetStream helpers shared by the log, its blob store and its work queues: retries of
 * transient failures (leader elections, reconnects) and idempotent stream creation.
 */
import { JetStreamApiError, type JetStreamManager, type JsMsg, type StreamConfig } from '@nats-io/jetstream';
import { IncompatibleStreamError, LogBehindError, LogNotFoundError, MissingLogMessageError } from '../errors.js';
import { backoffMs } from '../../core/backoff.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Errors worth retrying: no leader yet, a timeout, the server reconnecting (or its
 * heartbeats missed: the client has not noticed yet). */
export function isTransient(err: unknown): boolean {
  // The client wraps the cause (a publish nobody answered is reported as "JetStream not enabled").
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as Error).cause, depth++) {
    // A server that has not caught up (a healed partition's old leader) may answer first.
    if (e instanceof MissingLogMessageError || e instanceof LogBehindError) return true;
    if (e instanceof JetStreamApiError) {
      // 503 "JetStream system temporarily unavailable", 10008; leader elections answer 503/timeouts.
      if (e.status === 503 || e.code === 10008) return true;
      // 10005 "no suitable peers for placement, peer offline": a replica's server is away (a
      // partition, a restart) and will be back; without "peer offline" the cluster is too small.
      if (e.code === 10005 && /peer offline/i.test(e.message)) return true;
      continue;
    }
    const name = (e as Error)?.name ?? '';
    const msg = String((e as Error)?.message ?? '');
    if (
      name === 'TimeoutError' ||
      name === 'NoRespondersError' ||
      name === 'NoResponders' ||
      /timeout|no responders|temporarily unavailable|disconnect|reconnect|leader|heartbeats missed/i.test(msg)
    ) {
      return true;
    }
  }
  return false;
}

/** The cluster has fewer servers than the replicas asked of a stream: waiting does not help. */
export function isTooFewServers(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as Error).cause, depth++) {
    if (e instanceof JetStreamApiError) return (e.code === 10005 || e.code === 10023) && !/peer offline/i.test(e.message);
  }
  return false;
}

/** Runs `fn`, retrying transient failures with exponential backoff until `retryForMs` has passed. */
export async function withRetry<T>(retryForMs: number, fn: (attempt: number) => Promise<T>): Promise<T> {
  const deadline = Date.now() + retryForMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      const delay = backoffMs(100, 2000, attempt + 1);
      if (!isTransient(err) || Date.now() + delay > deadline) throw err;
      await sleep(delay);
    }
  }
}

/** Names the commit a message holds when its message id is not the commit id: a commit appended
 * again after the log lost it while the stream's duplicate window still remembered its id. */
export const COMMIT_HEADER = 'Crucible-Commit';

/** The commit id of a stored message, from its headers. */
export function storedCommitId(h: { get(key: string): string } | undefined, seq: number): string {
  return h?.get(COMMIT_HEADER) || h?.get('Nats-Msg-Id') || `seq-${seq}`;
}

export function commitIdOf(m: Pick<JsMsg, 'headers' | 'seq'>): string {
  return storedCommitId(m.headers, m.seq);
}

/**
 * Finds the stream or creates it (idempotent: a concurrent creator's stream is accepted if it
 * passes `check`). An existing stream that fails `check` is refused, untouched.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  retryForMs: number,
  want: Partial<StreamConfig>,
  create: boolean,
  check: (existing: StreamConfig) => string | null,
): Promise<StreamConfig> {
  const name = want.name!;
  const existing = async () => {
    try {
      return (await withRetry(retryForMs, () => jsm.streams.info(name))).config;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === 10059) return null;
      throw err;
    }
  };
  let found = await existing();
  if (!found) {
    if (!create) throw new LogNotFoundError('JetStream', `stream "${name}" (nothing was recorded under this name on the server)`);
    try {
      found = (await withRetry(retryForMs, () => jsm.streams.add({ ...want, name }))).config;
    } catch (err) {
      // Someone else created it meanwhile (10058: name already in use): check theirs.
      found = await existing();
      if (!found) throw err;
    }
  }
  const problem = check(found);
  if (problem) throw new IncompatibleStreamError(name, problem);
  return found;
}
