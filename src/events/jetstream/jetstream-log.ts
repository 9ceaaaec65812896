/**
 * The JetStream backend of the EventLog port (nats-server >= 2.9).
 *
 * - One message per commit, holding its N events (2.9 has no atomic batch publish); the message
 *   id (`Nats-Msg-Id`) is the commit id, so the server drops a repeat within the stream's
 *   duplicate window and answers with the first copy's sequence.
 * - Each log stream ("judge/0") is one subject; optimistic concurrency is the server's
 *   expected-last-subject-sequence check.
 * - Positions: event i of the message with sequence s is s * 2^16 + i (./positions.ts).
 * - Reads and subscriptions use ordered consumers (client-side filters: a commit may mix types
 *   and runs, and 2.9 has no multi-subject filters); a subscription says `caught-up` whenever
 *   the server reports nothing pending.
 * - Work queues are durable pull consumers with explicit acks (./jetstream-queue.ts).
 * - Stream and consumer creation are idempotent; calls are retried with backoff while a cluster
 *   elects a leader; a stream made by another version or application is refused untouched.
 */
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import {
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import { catalog } from '../catalog.js';
import { decodeParsed, encodeCommit, matchesFilter, type EncodedCommit } from '../commit.js';
import type { EventEnvelope, NewEvent } from '../envelope.js';
import {
  CommitTooLargeError,
  ConcurrencyError,
  IncompatibleStreamError,
  InvalidLogArgumentError,
  LogClosedError,
  LogBehindError,
  MissingLogMessageError,
  LogNotFoundError,
  LogUnavailableError,
  MalformedEventError,
  UnsupportedServerError,
} from '../errors.js';
import { JetStreamBlobStore } from './jetstream-blobs.js';
import type { NatsCredentials } from './nats-roles.js';
import { connectFailure, credentialOptions, inboxRefusal, permissionFailure } from './nats-connect.js';
import { COMMIT_HEADER, commitIdOf, ensureStream, isTooFewServers, isTransient, sleep, storedCommitId, withRetry } from './jetstream-support.js';
import { parseAppendArgs, parseReadArgs, parseStreamName, parseSubscribeOptions } from '../log-args.js';
import {
  DEFAULT_MAX_COMMIT_BYTES,
  MAX_COMMIT_EVENTS,
  ORIGIN,
  type AppendOptions,
  type AppendResult,
  type EventLog,
  type LogCapabilities,
  type Position,
  type ReadFilter,
  type ReadRange,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionItem,
} from '../log.js';
import { eventPosition, firstSeqAfter, headPosition, seqOf } from '../positions.js';
import { watchForStall, type StallWatch } from './stall-watch.js';
import type { EventCodec } from '../registry.js';
import { JetStreamWorkQueue } from './jetstream-queue.js';
import { parseWorkQueueOptions, type WorkQueue, type WorkQueueOptions } from '../work-queue.js';

export { commitIdOf, ensureStream, isTransient, withRetry } from './jetstream-support.js';

/** Bump when the message layout changes in a way older code cannot read. */
export const JETSTREAM_LOG_FORMAT = 1;
const DESCRIPTION = /^crucible event log, format (\d+)$/;
const DEFAULT_STALL_MS = 5000;
/** Reads of at most this many messages use direct gets instead of an ordered consumer. */
const DIRECT_READ = 32;
/** Direct gets in flight at once. */
const GET_WINDOW = 128;

export interface JetStreamLogOptions {
  /** nats://host:port, or several for a cluster. */
  servers: string | readonly string[];
  /** JetStream stream holding the events. Default "CRUCIBLE_EVENTS". */
  stream?: string;
  /** Subject prefix of the events. Default "crucible.events". */
  subjectPrefix?: string;
  /** Replicas of a stream this call creates. Default: 3 on a cluster of three or more servers, else 1. */
  replicas?: number;
  /** Duplicate window of a stream this call creates (ms). An existing stream keeps its own. Default 2 min. */
  dedupWindowMs?: number;
  maxCommitBytes?: number;
  registry?: EventCodec;
  /** How long calls are retried while the cluster has no leader, or the server is away. Default 60 s. */
  retryForMs?: number;
  /** Create the streams when absent. Default true. */
  create?: boolean;
  /** Reads of at most this many messages use direct gets, longer ones an ordered consumer. Default 32. */
  directReadMessages?: number;
  /** A role's credentials, for a cluster started with auth (nats-auth.ts). */
  credentials?: NatsCredentials;
  /** Liveness of the connection (see connectNats). */
  ping?: PingOptions;
  /** How long connecting may take (default 5000 ms). */
  connectTimeoutMs?: number;
  /** How long a reader waits for its ordered consumer's next message, while the stream holds
   * one, before it replaces the consumer (stall-watch.ts). Default 5000. */
  stallMs?: number;
}

/**
 * How soon a client notices that its server is gone without closing the connection (a cut
 * link, a frozen process): it pings every `intervalMs` and gives the connection up after
 * `maxOut` pings unanswered, then reconnects to another server of the cluster. A killed server
 * closes its sockets and is noticed at once; a cut one only by these pings (nats.js's own
 * default, 2 min, would leave a worker hanging for minutes).
 */
export interface PingOptions {
  /** Default 2000. */
  intervalMs?: number;
  /** Default 2. */
  maxOut?: number;
}

export const DEFAULT_PING: Required<PingOptions> = { intervalMs: 2000, maxOut: 2 };

/** What the connected server offers (2.9.10 has none of these). */
export interface ServerFeatures {
  version: string;
  /** Atomic batch publish (2.12): a commit could span messages. */
  atomicBatch: boolean;
  /** Consumers with several subject filters (2.10). */
  multiFilterConsumers: boolean;
  /** Per-message TTL (2.11). */
  messageTtl: boolean;
  /** Expected-last-subject-sequence holds between concurrent publishes on a cluster (2.10). */
  serializedSubjectChecks: boolean;
  /** A stream's replicas keep one history through failovers (2.9.21: a new leader syncs its count
   * of refused appends; before, followers could refuse every later conditional append). */
  replicasAgreeAfterFailover: boolean;
}

export function featuresOf(version: string): ServerFeatures {
  const [maj = 0, min = 0, patch = 0] = version.split('.').map((x) => Number.parseInt(x, 10) || 0);
  const atLeast = (a: number, b: number, c = 0) => maj > a || (maj === a && (min > b || (min === b && patch >= c)));
  return {
    version,
    atomicBatch: atLeast(2, 12),
    multiFilterConsumers: atLeast(2, 10),
    messageTtl: atLeast(2, 11),
    serializedSubjectChecks: atLeast(2, 10),
    replicasAgreeAfterFailover: atLeast(2, 9, 21),
  };
}

/** What an operator must know about a log kept on `replicas` servers of this version. */
export function serverNotices(features: ServerFeatures, replicas: number): string[] {
  if (replicas <= 1 || features.replicasAgreeAfterFailover) return [];
  return [
    `nats-server ${features.version} on a cluster: after a failover the replicas of a stream can hold different histories ` +
      `(fixed in nats-server 2.9.21 and 2.10), losing acknowledged commits; a run can then stall. ` +
      `Run a cluster on nats-server 2.10 or newer (docs/jetstream.md)`,
  ];
}

/** Subject token for a log stream name: base64url, so any name is one valid token. */
export function streamToken(stream: string): string {
  return Buffer.from(stream, 'utf8').toString('base64url');
}

function streamOfSubject(prefix: string, subject: string): string {
  return Buffer.from(subject.slice(prefix.length + 3), 'base64url').toString('utf8');
}

/** The message body of a commit: the events with their data inlined as raw JSON (no double encoding). */
export function commitPayload(commit: EncodedCommit): string {
  const parts = commit.events.map(
    (e) =>
      `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"v":${e.v},"runId":${JSON.stringify(e.runId)},` +
      `"causationId":${JSON.stringify(e.causationId)},"correlationId":${JSON.stringify(e.correlationId)},` +
      `"at":${JSON.stringify(e.at)},"data":${e.data}}`,
  );
  return `{"format":${JETSTREAM_LOG_FORMAT},"events":[${parts.join(',')}]}`;
}

interface PayloadEvent {
  id: string;
  type: string;
  v: number;
  runId: string;
  causationId: string | null;
  correlationId: string | null;
  at: string;
  data: unknown;
}

/** Connects, failing with a clear error when no server answers. */
export async function connectNats(
  servers: string | readonly string[],
  opts: { timeoutMs?: number; name?: string; credentials?: NatsCredentials; ping?: PingOptions } = {},
): Promise<NatsConnection> {
  const list = typeof servers === 'string' ? [servers] : [...servers];
  const ping = { ...DEFAULT_PING, ...opts.ping };
  if (!Number.isInteger(ping.intervalMs) || ping.intervalMs < 100)
    throw new InvalidLogArgumentError('connect', [{ path: 'ping.intervalMs', message: `${ping.intervalMs}: expected an integer of at least 100 (ms)` }]);
  if (!Number.isInteger(ping.maxOut) || ping.maxOut < 1)
    throw new InvalidLogArgumentError('connect', [{ path: 'ping.maxOut', message: `${ping.maxOut}: expected a positive integer` }]);
  try {
    // Every server given is tried (and those the cluster announces): a client whose server is
    // gone goes on through another.
    return await connect({
      servers: list,
      name: opts.name ?? (opts.credentials ? `crucible ${opts.credentials.role}` : 'crucible'),
      timeout: opts.timeoutMs ?? 5000,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: ping.intervalMs,
      maxPingOut: ping.maxOut,
      ...credentialOptions(opts.credentials),
    });
  } catch (err) {
    throw connectFailure(list.join(','), err, opts.credentials);
  }
}

export async function openJetStreamLog(opts: JetStreamLogOptions): Promise<JetStreamEventLog> {
  const nc = await connectNats(opts.servers, {
    ...(opts.credentials ? { credentials: opts.credentials } : {}),
    ...(opts.ping ? { ping: opts.ping } : {}),
    ...(opts.connectTimeoutMs !== undefined ? { timeoutMs: opts.connectTimeoutMs } : {}),
  });
  try {
    const log = new JetStreamEventLog(nc, opts);
    await log.init();
    return log;
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw inboxRefusal(err, (typeof opts.servers === 'string' ? [opts.servers] : opts.servers).join(','), opts.credentials) ?? err;
  }
}

export class JetStreamEventLog implements EventLog {
  readonly location: string;
  readonly registry: EventCodec;
  readonly features: ServerFeatures;
  readonly streamName: string;
  readonly prefix: string;
  #identity: string | null = null;
  #capabilities: LogCapabilities | null = null;
  #blobs: JetStreamBlobStore | null = null;
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  #jsm: JetStreamManager | null = null;
  readonly #opts: JetStreamLogOptions;
  readonly #retryForMs: number;
  /** Largest message body the server takes, less room for headers. */
  #maxPayload = 0;
  #replicas = 1;
  readonly #subs = new Set<JetStreamSubscription>();
  readonly #queues = new Set<WorkQueue>();
  #closed = false;

  constructor(nc: NatsConnection, opts: JetStreamLogOptions) {
    this.#nc = nc;
    this.#opts = opts;
    this.location = (typeof opts.servers === 'string' ? [opts.servers] : opts.servers).join(',');
    this.registry = opts.registry ?? catalog;
    this.streamName = opts.stream ?? 'CRUCIBLE_EVENTS';
    this.prefix = opts.subjectPrefix ?? 'crucible.events';
    this.#retryForMs = opts.retryForMs ?? 60_000;
    this.#js = jetstream(nc, { timeout: 10_000 });
    const version = nc.info?.version ?? '0.0.0';
    this.features = featuresOf(version);
  }

  get capabilities(): LogCapabilities {
    if (!this.#capabilities) throw new Error('JetStreamEventLog used before init()');
    return this.#capabilities;
  }

  /** The stream and when it was made: a stream deleted and made again under its name is another
   * log (a cluster keeps the time it was made in the stream's assignment, the same on every server). */
  get identity(): string {
    if (!this.#identity) throw new Error('JetStreamEventLog used before init()');
    return this.#identity;
  }

  get blobs(): JetStreamBlobStore {
    if (!this.#blobs) throw new Error('JetStreamEventLog used before init()');
    return this.#blobs;
  }

  get jsm(): JetStreamManager {
    return this.#jsm!;
  }

  get js(): JetStreamClient {
    return this.#js;
  }

  /** Replicas of the streams this handle created or would create. */
  get replicas(): number {
    return this.#replicas;
  }

  get retryForMs(): number {
    return this.#retryForMs;
  }

  /** Ordered consumers of this handle's reads and subscriptions given up as stalled. */
  stalls = 0;

  notices: readonly string[] = [];

  /** A stall watch for a reader whose next message would be `next()` (stall-watch.ts). */
  watchForStall(next: () => number, giveUp: () => void): StallWatch {
    return watchForStall(this.#opts.stallMs ?? DEFAULT_STALL_MS, async () => (await this.jsm.streams.info(this.streamName)).state.last_seq >= next(), giveUp);
  }

  get connection(): NatsConnection {
    return this.#nc;
  }

  /** Checks the server, then finds or creates the stream and checks it is ours. */
  async init(): Promise<void> {
    const info = this.#nc.info;
    if (!info) throw new LogUnavailableError(this.location, 'the server sent no INFO');
    const [maj = 0, min = 0] = info.version.split('.').map((x) => Number.parseInt(x, 10));
    if (maj < 2 || (maj === 2 && min < 9)) {
      throw new UnsupportedServerError(
        info.version,
        'crucible needs nats-server 2.9 or newer (expected-last-subject-sequence, named consumers, nak with delay)',
      );
    }
    if (info.jetstream === false)
      throw new UnsupportedServerError(info.version, 'JetStream is not enabled on this server (start it with -js, or `crucible nats up`)');
    // A log on a cluster must survive a server: replicate unless told otherwise. The cluster's
    // size is not in the INFO (it lists the servers routed to now, fewer while one is away), so
    // R3 is asked, and R1 taken only when the cluster answers that it is too small for it.
    this.#replicas = this.#opts.replicas ?? (info.cluster !== undefined ? 3 : 1);
    this.#jsm = await withRetry(this.#retryForMs, () => jetstreamManager(this.#nc, { timeout: 10_000 }));
    const config = await this.refusedAs(`create the log stream "${this.streamName}"`, async () => {
      try {
        return await this.#ensureStream();
      } catch (err) {
        if (this.#opts.replicas !== undefined || this.#replicas === 1 || !isTooFewServers(err)) throw err;
        this.#replicas = 1;
        return this.#ensureStream();
      }
    });
    // The streams made beside the log (blobs, board, task queues) take the log's replicas, not
    // what this client guessed: one that connected while a server was away sees a smaller cluster.
    this.#replicas = config.num_replicas ?? this.#replicas;
    const made = await withRetry(this.#retryForMs, () => this.jsm.streams.info(this.streamName));
    this.#identity = `jetstream:${this.streamName}@${made.created}`;
    const windowMs = Math.round(Number(config.duplicate_window ?? 120_000_000_000) / 1e6);
    this.#maxPayload = info.max_payload - 4096;
    const maxCommitBytes = Math.min(this.#opts.maxCommitBytes ?? DEFAULT_MAX_COMMIT_BYTES, this.#maxPayload);
    this.notices = serverNotices(this.features, this.#replicas);
    this.#capabilities = {
      dedupWindowMs: windowMs,
      maxCommitBytes,
      maxCommitEvents: MAX_COMMIT_EVENTS,
      multiProcess: true,
      durable: true,
      sharedWorkQueues: true,
      // Checking an explicit id against the whole log would need an index the server lacks.
      refusesReusedEventIds: false,
    };
    this.#blobs = new JetStreamBlobStore(this, {
      stream: `${this.streamName}_BLOBS`,
      subjectPrefix: `${this.prefix}-blobs`,
      replicas: this.#replicas,
      create: this.#opts.create ?? true,
    });
    await this.refusedAs(`create the blob stream "${this.streamName}_BLOBS"`, () => this.#blobs!.init());
  }

  async #ensureStream(): Promise<StreamConfig> {
    const want: Partial<StreamConfig> = {
      name: this.streamName,
      description: `crucible event log, format ${JETSTREAM_LOG_FORMAT}`,
      // Commit subjects only: what a role may publish under the run's name for the streams
      // beside the log (blobs, board, tasks; NATS grants cannot tell `<run>` from
      // `<run>-blobs`) finds no stream here, and is never stored in the log.
      subjects: [this.#commitSubjects()],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      num_replicas: this.#replicas,
      duplicate_window: (this.#opts.dedupWindowMs ?? 120_000) * 1_000_000,
      max_msgs: -1,
      max_bytes: -1,
      max_age: 0,
    };
    return ensureStream(this.jsm, this.#retryForMs, want, this.#opts.create ?? true, (existing) => {
      const m = DESCRIPTION.exec(existing.description ?? '');
      if (!m) return `its description is "${existing.description ?? ''}", not a crucible event log's (another application's stream?)`;
      const format = Number(m[1]);
      if (format > JETSTREAM_LOG_FORMAT) return `it has log format ${format}, newer than this crucible reads (${JETSTREAM_LOG_FORMAT}); upgrade crucible`;
      if (format < JETSTREAM_LOG_FORMAT)
        return `it has log format ${format}, older than this crucible writes (${JETSTREAM_LOG_FORMAT}); export it with the crucible that wrote it`;
      const subjects = existing.subjects ?? [];
      // A log made before it held commit subjects only took everything under its prefix.
      const ok = subjects.length === 1 && (subjects[0] === this.#commitSubjects() || subjects[0] === `${this.prefix}.>`);
      if (!ok) return `its subjects are ${JSON.stringify(subjects)}, expected ["${this.#commitSubjects()}"]`;
      return null;
    });
  }

  #commitSubjects(): string {
    return `${this.prefix}.s.*`;
  }

  subjectOf(stream: string): string {
    return `${this.prefix}.s.${streamToken(stream)}`;
  }

  async append(stream: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    this.#assertOpen();
    const args = parseAppendArgs(stream, options);
    const { commitId, expectedPosition } = args.options;
    const commit = encodeCommit(this.registry, args.stream, events, commitId, this.capabilities);
    const payload = Buffer.from(commitPayload(commit), 'utf8');
    if (payload.byteLength > this.#maxPayload) {
      throw new CommitTooLargeError(commitId, args.stream, payload.byteLength, this.#maxPayload, 'bytes');
    }
    const h = headers();
    h.set('Crucible-Count', String(commit.events.length));
    const subject = this.subjectOf(args.stream);
    let lostReply = false;
    const expectSubject = expectedPosition !== undefined ? seqOf(expectedPosition) : undefined;
    // Clustered 2.9 servers do not serialize the subject check between concurrent publishes
    // (nats-server issue 4320; measured here: 37 of 200 races both won on 2.9.10 R3). The
    // stream-wide check is serialized, so a conditional append there also expects the stream's
    // last sequence, and starts over when only another stream moved it.
    const serialize = expectSubject !== undefined && this.#replicas > 1 && !this.features.serializedSubjectChecks;
    const publish = (msgID: string) =>
      this.refusedAs(`append to stream "${args.stream}"`, () =>
        withRetry(this.#retryForMs, async (attempt) => {
          if (attempt > 0) lostReply = true;
          for (let round = 0; ; round++) {
            const streamSeq = serialize ? (await this.jsm.streams.info(this.streamName)).state.last_seq : undefined;
            try {
              return await this.#js.publish(subject, payload, {
                msgID,
                headers: h,
                ...(expectSubject !== undefined
                  ? { expect: { lastSubjectSequence: expectSubject, ...(streamSeq !== undefined ? { lastSequence: streamSeq } : {}) } }
                  : {}),
              });
            } catch (err) {
              if (!(err instanceof JetStreamApiError && (err.code === 10071 || err.code === 10164))) throw err;
              // Servers from 2.10 check the expected sequence before the duplicate window: a
              // retry whose first copy landed is refused, and its commit follows the expected one.
              const ours = await this.#nextOnSubject(subject, (expectSubject ?? 0) + 1);
              if (ours !== null && ours.commitId === commitId) return { stream: this.streamName, seq: ours.seq, duplicate: true, domain: '' };
              const actual = await this.streamHead(args.stream);
              if (!serialize || seqOf(actual) !== expectSubject) throw new ConcurrencyError(args.stream, expectedPosition ?? ORIGIN, actual);
              // Another stream's append moved the stream: ours still holds, try again.
              await sleep(Math.min(50, 1 + round * 2) * Math.random());
            }
          }
        }),
      );
    let ack = await publish(commitId);
    if (ack.duplicate) {
      // The server remembers the id; a failing-over cluster may have dropped the message it
      // named (its duplicate window outlives it). Only a commit the log holds is a duplicate:
      // else it is appended again under an id of its own, the commit id in a header. The new
      // id is derived from the lost sequence, so writers that find the same loss append once.
      const held = await this.commitIdAt(eventPosition(ack.seq, 0));
      if (held !== commitId) {
        h.set(COMMIT_HEADER, commitId);
        lostReply = false;
        ack = await publish(`${commitId}#lost-at-${ack.seq}`);
      }
    }
    const positions = commit.events.map((_, i) => eventPosition(ack.seq, i));
    // A retry after a lost reply finds our own first copy: that is our write, not someone else's.
    return { positions, duplicate: ack.duplicate && !lostReply };
  }

  /** The role this handle connected as ("anonymous" on a cluster without auth). */
  get role(): string {
    return this.#opts.credentials?.role ?? 'anonymous';
  }

  /** Runs `fn`, turning the server's refusal of this role's publish into a LogPermissionError. */
  async refusedAs<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw permissionFailure(err, this.role, operation) ?? err;
    }
  }

  /** Reads whose consumer delivered a page the stream's leader does not hold (a replica whose
   * history differs from the leader's), read again from the leader. */
  divergentReads = 0;

  /** Messages a subscription's consumer skipped and that were read from the leader instead. */
  gapsFilled = 0;

  async head(): Promise<Position> {
    this.#assertOpen();
    const info = await withRetry(this.#retryForMs, () => this.jsm.streams.info(this.streamName));
    return headPosition(info.state.last_seq);
  }

  /** The commit id of the message at `position`'s sequence, as the stream's leader answers now.
   * A message the leader does not hold is asked again within the retry time (a leader that has
   * not caught up answers for a moment), then null. */
  async commitIdAt(position: Position): Promise<string | null> {
    this.#assertOpen();
    const seq = seqOf(position);
    try {
      const m = await withRetry(this.#retryForMs, async () => {
        const got = await this.jsm.streams.getMessage(this.streamName, { seq });
        if (got === null) throw new MissingLogMessageError(this.streamName, seq, seq);
        return got;
      });
      return storedCommitId(m.header, m.seq);
    } catch (err) {
      if (err instanceof MissingLogMessageError) return null;
      throw err;
    }
  }

  /** The first message on `subject` at or after `seq`, as the leader answers (null: none). */
  async #nextOnSubject(subject: string, seq: number): Promise<{ seq: number; commitId: string } | null> {
    // The server takes `next_by_subj` on a message get since 2.9; nats.js types it only for direct gets.
    const query = { seq, next_by_subj: subject } as unknown as { seq: number };
    const m = await withRetry(this.#retryForMs, () => this.jsm.streams.getMessage(this.streamName, query));
    return m === null ? null : { seq: m.seq, commitId: storedCommitId(m.header, m.seq) };
  }

  async streamHead(stream: string): Promise<Position> {
    this.#assertOpen();
    const subject = this.subjectOf(parseStreamName('streamHead', stream));
    const m = await withRetry(this.#retryForMs, () => this.jsm.streams.getMessage(this.streamName, { last_by_subj: subject }));
    if (!m) return ORIGIN;
    const count = Number(m.header.get('Crucible-Count'));
    return eventPosition(m.seq, Math.max(0, (Number.isInteger(count) ? count : 1) - 1));
  }

  /** Decodes the events of one message that match the filter and sit in (after, to]. */
  decodeMessage(
    seq: number,
    subject: string,
    data: Uint8Array,
    commitId: string,
    filter: ReadFilter,
    after: Position = ORIGIN,
    to: Position = Number.MAX_SAFE_INTEGER as Position,
  ): EventEnvelope[] {
    // Commits live on `<prefix>.s.<stream>`. A log stream made before it held commit subjects
    // only also took whatever else was published under the prefix (a role's grants for blobs,
    // leases, heartbeats and tasks match such subjects: `crucible.run.*.m.*` cannot tell a run
    // from its blob store): that is not an event of this log, and is passed over.
    if (!subject.startsWith(`${this.prefix}.s.`)) return [];
    const stream = streamOfSubject(this.prefix, subject);
    let body: { format?: unknown; events?: unknown };
    try {
      body = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as typeof body;
    } catch {
      throw new MalformedEventError(undefined, undefined, [{ path: '', message: 'stored commit is not valid JSON' }], { position: eventPosition(seq, 0) });
    }
    if (body.format !== JETSTREAM_LOG_FORMAT || !Array.isArray(body.events)) {
      throw new MalformedEventError(
        undefined,
        undefined,
        [{ path: 'format', message: `stored commit has format ${String(body.format)}, this crucible reads ${JETSTREAM_LOG_FORMAT}` }],
        { position: eventPosition(seq, 0) },
      );
    }
    const out: EventEnvelope[] = [];
    const events = body.events as PayloadEvent[];
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      const position = eventPosition(seq, i);
      if (position <= after || position > to || !matchesFilter(filter, stream, e.type, e.runId)) continue;
      out.push(decodeParsed(this.registry, e, e.data, position, stream, commitId));
    }
    return out;
  }

  /** An ordered consumer from `startSeq`; the caller stops it. */
  async orderedMessages(startSeq: number, retryForMs = this.#retryForMs): Promise<ConsumerMessages> {
    const consumer = await withRetry(retryForMs, () => this.#js.consumers.get(this.streamName, { opt_start_seq: Math.max(1, startSeq) }));
    return consumer.consume({ max_messages: 1000 });
  }

  /** Messages [startSeq, lastSeq] by direct gets, a window in flight at a time. */
  async *#directPages(
    startSeq: number,
    lastSeq: number,
    filter: ReadFilter,
    after: Position,
    to: Position,
    limit: { left: number },
  ): AsyncGenerator<readonly EventEnvelope[]> {
    for (let from = startSeq; from <= lastSeq && limit.left > 0; from += GET_WINDOW) {
      const seqs = Array.from({ length: Math.min(GET_WINDOW, lastSeq - from + 1) }, (_, i) => from + i);
      const stored = await Promise.all(
        seqs.map((seq) =>
          withRetry(this.#retryForMs, async () => {
            const m = await this.jsm.streams.getMessage(this.streamName, { seq });
            if (m === null) throw new MissingLogMessageError(this.streamName, seq, lastSeq);
            return m;
          }),
        ),
      );
      const page: EventEnvelope[] = [];
      for (const m of stored) {
        if (this.#closed) throw new LogClosedError();
        for (const e of this.decodeMessage(m.seq, m.subject, m.data, storedCommitId(m.header, m.seq), filter, after, to)) {
          page.push(e);
          if (--limit.left <= 0) break;
        }
        if (limit.left <= 0) break;
      }
      if (page.length) yield page;
    }
  }

  /** Each message holding an asked position is read once by a direct get, a window in flight. */
  async readAt(positions: readonly Position[]): Promise<(EventEnvelope | undefined)[]> {
    this.#assertOpen();
    const seqs = [...new Set(positions.map(seqOf))].filter((seq) => seq > 0);
    const bySeq = new Map<number, EventEnvelope[]>();
    for (let from = 0; from < seqs.length; from += GET_WINDOW) {
      const stored = await Promise.all(
        seqs.slice(from, from + GET_WINDOW).map((seq) =>
          // null: no message there (past the head, or deleted), so no event at its positions.
          withRetry(this.#retryForMs, () => this.jsm.streams.getMessage(this.streamName, { seq })),
        ),
      );
      for (const m of stored) if (m !== null) bySeq.set(m.seq, this.decodeMessage(m.seq, m.subject, m.data, storedCommitId(m.header, m.seq), {}));
    }
    return positions.map((position) => bySeq.get(seqOf(position))?.find((e) => e.position === position));
  }

  async *read(range?: ReadRange, filter?: ReadFilter): AsyncIterable<EventEnvelope> {
    for await (const page of this.readPages(range, filter)) yield* page;
  }

  async *readPages(range?: ReadRange, filter?: ReadFilter): AsyncIterable<readonly EventEnvelope[]> {
    this.#assertOpen();
    const args = parseReadArgs(range, filter);
    const after = args.range.after ?? ORIGIN;
    // A read up to `to` returns every event up to it: a server that answers with less (behind)
    // is asked again, since the caller moves its checkpoint to `to` once the read ends.
    const wantSeq = args.range.to !== undefined ? seqOf(args.range.to) : 0;
    const info = await withRetry(this.#retryForMs, async () => {
      const i = await this.jsm.streams.info(this.streamName);
      if (i.state.last_seq < wantSeq) throw new LogBehindError(this.streamName, i.state.last_seq, wantSeq);
      return i;
    });
    const lastSeq = Math.min(info.state.last_seq, args.range.to !== undefined ? seqOf(args.range.to) : Number.POSITIVE_INFINITY);
    const to = args.range.to ?? headPosition(info.state.last_seq);
    const startSeq = firstSeqAfter(after);
    let left = args.range.limit ?? Number.POSITIVE_INFINITY;
    if (startSeq > lastSeq || left <= 0) return;
    const limit = { left };
    // A few messages (a tailing reader): direct gets, no consumer to create. Many: an ordered
    // consumer (direct gets run at a few thousand messages/s, a consumer at tens of thousands),
    // unless it cannot be created (on a cluster that lost a server, creating one is a round of
    // the meta group that stalls for seconds): then direct gets, which only need the stream leader.
    let messages: ConsumerMessages | null = null;
    if (lastSeq - startSeq + 1 > (this.#opts.directReadMessages ?? DIRECT_READ)) {
      try {
        messages = await this.orderedMessages(startSeq, 0);
      } catch (err) {
        if (!isTransient(err)) throw err;
      }
    }
    if (!messages) {
      yield* this.#directPages(startSeq, lastSeq, args.filter, after, to, limit);
      return;
    }
    left = limit.left;
    let next = startSeq;
    const consumer = messages;
    const watch = this.watchForStall(
      () => next,
      () => consumer.stop(),
    );
    // A consumer may be served by a replica whose history differs from the leader's (nats-server
    // 2.9 after a failover: followers that refused the conditional appends the leader took,
    // docs/jetstream.md): each page is checked against the leader before it is yielded (its last
    // message's commit, one get a page), and on a difference the read goes on from the page's
    // first message by gets from the leader.
    let pageStart = next;
    let leftAtPageStart = left;
    let lastMsg: { seq: number; commitId: string } | null = null;
    const leaderAgrees = async (): Promise<boolean> => {
      if (lastMsg === null) return true;
      if ((await this.commitIdAt(eventPosition(lastMsg.seq, 0))) === lastMsg.commitId) return true;
      this.divergentReads++;
      next = pageStart;
      left = leftAtPageStart;
      return false;
    };
    try {
      let page: EventEnvelope[] = [];
      let diverged = false;
      for await (const m of messages) {
        watch.busy();
        if (this.#closed) throw new LogClosedError();
        // An ordered consumer delivers every stored message in order; one out of order (a
        // consumer on a replica behind, a deleted message) ends it: the rest comes by direct gets
        // from the stream's leader, which retry a missing message and then name it, never skip it.
        if (m.seq !== next) break;
        next++;
        const commitId = commitIdOf(m);
        lastMsg = { seq: m.seq, commitId };
        for (const e of this.decodeMessage(m.seq, m.subject, m.data, commitId, args.filter, after, to)) {
          page.push(e);
          if (--left <= 0) break;
        }
        if (left <= 0 || m.seq >= lastSeq) break;
        if (page.length >= 1000) {
          if (!(await leaderAgrees())) {
            diverged = true;
            break;
          }
          yield page;
          page = [];
          pageStart = next;
          leftAtPageStart = left;
          lastMsg = null;
        }
        watch.waiting();
      }
      // Checked even when nothing matched the filter: what the replica left out may match.
      if (!diverged && (await leaderAgrees()) && page.length) yield page;
    } finally {
      watch.stop();
      messages.stop();
    }
    // A consumer that stalled, delivered out of order, or ended before the last message (nats.js
    // ends one quietly when its connection drains or closes): the rest by direct gets, which only
    // need the stream's leader. A read never ends short of what it was asked for.
    if (left > 0 && next <= lastSeq) {
      if (watch.stalled) this.stalls++;
      limit.left = left;
      yield* this.#directPages(next, lastSeq, args.filter, after, to, limit);
    }
  }

  subscribe(options?: SubscribeOptions): Subscription {
    this.#assertOpen();
    const opts = parseSubscribeOptions(options);
    const sub = new JetStreamSubscription(this, opts.after ?? ORIGIN, opts.filter ?? {}, () => this.#subs.delete(sub));
    this.#subs.add(sub);
    return sub;
  }

  async workQueue(options: WorkQueueOptions): Promise<WorkQueue> {
    this.#assertOpen();
    const q = await JetStreamWorkQueue.open(this, parseWorkQueueOptions(options));
    this.#queues.add(q);
    return q;
  }

  get closed(): boolean {
    return this.#closed;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#subs) await s.close();
    for (const q of this.#queues) await q.close();
    await this.#nc.drain().catch(() => this.#nc.close());
  }

  #assertOpen(): void {
    if (this.#closed) throw new LogClosedError();
  }
}

/** Ordered-consumer subscription with `caught-up` at every point where nothing is pending. */
class JetStreamSubscription implements Subscription {
  #closed = false;
  #messages: ConsumerMessages | null = null;

  constructor(
    private readonly log: JetStreamEventLog,
    private readonly after: Position,
    private readonly filter: ReadFilter,
    private readonly onClose: () => void,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
    return this.#run();
  }

  async *#run(): AsyncGenerator<SubscriptionItem> {
    try {
      const info = await withRetry(this.log.retryForMs, () => this.log.jsm.streams.info(this.log.streamName));
      let next = firstSeqAfter(this.after);
      const lastSeq = info.state.last_seq;
      if (this.#closed) return;
      if (lastSeq < next) {
        const head = headPosition(lastSeq);
        yield { kind: 'caught-up', position: head > this.after ? head : this.after };
      }
      // A consumer that stalls is given up and another started after the last message seen.
      for (;;) {
        if (this.#closed) return;
        const messages = await this.log.orderedMessages(next);
        this.#messages = messages;
        if (this.#closed) return;
        const from = next;
        const watch = this.log.watchForStall(
          () => next,
          () => messages.stop(),
        );
        // A consumer may run on a replica whose history differs from the leader's (see
        // readPages): a message's events wait until the leader holds the last message of their
        // batch (the messages up to one the server says nothing is pending after, at most 1000),
        // and a batch it does not hold is read again from the leader, by a new consumer after it.
        let batch: EventEnvelope[] = [];
        let batchFrom = next;
        let batchMessages = 0;
        let last: { seq: number; commitId: string } | null = null;
        // Yields the batch's events (or the leader's, where it does not hold the batch's last
        // message) and returns whether the leader held it; null when the subscription closed.
        const checked = async function* (this: JetStreamSubscription): AsyncGenerator<SubscriptionItem, boolean | null> {
          const held = last === null || (await this.log.commitIdAt(eventPosition(last.seq, 0))) === last.commitId;
          const events = batch;
          const range = last === null ? null : { after: Math.max(this.after, headPosition(batchFrom - 1)) as Position, to: headPosition(last.seq) };
          batch = [];
          batchMessages = 0;
          batchFrom = next;
          last = null;
          const pages = held || range === null ? [events] : this.log.readPages(range, this.filter);
          if (!held) this.log.divergentReads++;
          for await (const page of pages) {
            for (const event of page) {
              if (this.#closed) return null;
              yield { kind: 'event', event };
            }
          }
          return held;
        }.bind(this);
        let diverged = false;
        try {
          for await (const m of messages) {
            watch.busy();
            // A replaced consumer starts where the last one stopped: nothing is delivered twice.
            if (m.seq < from || m.seq < next) {
              watch.waiting();
              continue;
            }
            // A consumer that skipped messages (on a replica behind): they are read from the
            // stream's leader first, so a subscriber never misses an event.
            if (m.seq > next) {
              const held = yield* checked();
              if (held === null) return;
              diverged = !held;
              if (diverged) break;
              const gapAfter = Math.max(this.after, headPosition(next - 1)) as Position;
              for await (const page of this.log.readPages({ after: gapAfter, to: headPosition(m.seq - 1) }, this.filter)) {
                for (const event of page) {
                  if (this.#closed) return;
                  yield { kind: 'event', event };
                }
              }
              this.log.gapsFilled++;
              batchFrom = m.seq;
            }
            const commitId = commitIdOf(m);
            for (const event of this.log.decodeMessage(m.seq, m.subject, m.data, commitId, this.filter, this.after)) batch.push(event);
            last = { seq: m.seq, commitId };
            batchMessages++;
            next = m.seq + 1;
            if (this.#closed) return;
            if (m.info.pending === 0 || batchMessages >= 1000) {
              const held = yield* checked();
              if (held === null) return;
              diverged = !held;
              if (m.info.pending === 0) yield { kind: 'caught-up', position: headPosition(m.seq) };
              if (diverged) break;
            }
            if (this.#closed) return;
            watch.waiting();
          }
        } finally {
          watch.stop();
        }
        // Messages taken but not yet checked are delivered again by the next consumer.
        if (last !== null) next = batchFrom;
        // Given up as stalled, or ended by nats.js on its own (its connection drained or closed,
        // the consumer stopped): a subscription is endless, so another consumer goes on from
        // the last message seen. A closed log ends it in orderedMessages.
        if (this.#closed) return;
        if (watch.stalled) this.log.stalls++;
        else await sleep(100);
      }
    } finally {
      this.#messages?.stop();
      this.onClose();
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#messages?.stop();
  }
}
