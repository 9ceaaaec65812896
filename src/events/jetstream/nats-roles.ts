/**
 * Who may use a crucible NATS cluster, and for what: one user per role in one account, each
 * authenticated by an nkey, each allowed to publish only to its own log stream (plus blobs, work
 * acks and the read side of the JetStream API).
 *
 * Why nkeys rather than passwords: the server config holds only public keys, so the config can be
 * copied to every node (and read by anyone there) without handing out a secret; the client signs
 * the server's nonce, so the seed never crosses the network, even before TLS is on.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { nkeys } from '@nats-io/transport-node';
import { LogCredentialsError } from '../errors.js';
import { JUDGE_SHARE_STREAMS, shareLeaseName } from '../../core/judge-shares.js';
import { taskQueueConsumer } from './jetstream-tasks.js';
import { workQueueConsumer } from './jetstream-queue.js';

/** The roles that get a user: the six actors, `reader` (replay, report, status, export: reads
 * only) and `admin` (a whole run in one process, imports: may write every stream). */
export const NATS_ROLES = ['conductor', 'solver', 'adversary', 'executor', 'judge', 'learner', 'reader', 'admin'] as const;
export const NatsRole = z.enum(NATS_ROLES);
export type NatsRole = z.infer<typeof NatsRole>;
export type ActorRole = Exclude<NatsRole, 'reader' | 'admin'>;

/**
 * The log streams each actor role appends to: its own stream (the stream is the actor's name),
 * and the `queue/<role>` stream of its own work queue over the log (the queue named after the
 * role records there the items it gave up on). A stream not listed here is refused by the server
 * for that role. The work queue named after a role is that role's alone: every other role's
 * pull, ack or consumer under its name is refused (see `closedConsumers`). A Judge split in
 * shares writes one stream and holds one lease per share (core/judge-shares.ts).
 */
export const ROLE_STREAMS: Readonly<Record<ActorRole, readonly string[]>> = {
  conductor: ['conductor', 'queue/conductor'],
  solver: ['solver', 'queue/solver'],
  adversary: ['adversary', 'queue/adversary'],
  executor: ['executor', 'queue/executor'],
  judge: ['judge', 'queue/judge', ...JUDGE_SHARE_STREAMS],
  learner: ['learner', 'queue/learner'],
};

/**
 * Beside a run's log, the worker processes keep a board (`crucible.run.<run>-workers.lease.<name>`:
 * a singleton role's lease, named `role-<role>`; `...hb.<worker>`: heartbeats) and task queues
 * (`crucible.run.<run>-tasks.<queue>`). A role may take only its own lease, beat as any worker,
 * and publish to and claim from the task queues listed here: every other task queue's consumer
 * is closed to it (no pull, no ack, no consumer made under its name).
 */
export const ROLE_TASK_QUEUES: Readonly<Record<ActorRole, readonly string[]>> = {
  conductor: [],
  // The Solver's tasks: one per problem of a round; the Adversary's: one per solution.
  solver: ['solutions'],
  adversary: ['suites'],
  executor: ['programs'],
  judge: [],
  learner: [],
};

/** The subject token of a log stream name (as jetstream-log.ts writes it). */
function token(stream: string): string {
  return Buffer.from(stream, 'utf8').toString('base64url');
}

/** JetStream API calls that read the log or move a consumer, and change no stored event. */
const READ_API = [
  '$JS.API.INFO',
  '$JS.API.STREAM.INFO.*',
  '$JS.API.STREAM.NAMES',
  '$JS.API.STREAM.LIST',
  '$JS.API.STREAM.MSG.GET.*',
  '$JS.API.DIRECT.GET.>',
  // Ordered consumers (reads, subscriptions) and work-queue consumers; no consumer deletion.
  '$JS.API.CONSUMER.CREATE.>',
  '$JS.API.CONSUMER.DURABLE.CREATE.>',
  '$JS.API.CONSUMER.INFO.>',
  '$JS.API.CONSUMER.MSG.NEXT.>',
];

/** Every run's streams: events under crucible.run.<run>.s.<stream token>, blobs under
 * crucible.run.<run>-blobs.{m,c}. A run id never holds a dot, so `*` is exactly one run. */
const BLOB_SUBJECTS = ['crucible.run.*.m.*', 'crucible.run.*.c.*.*'];

export interface RolePermissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[] };
}

/** The actor roles, each the owner of the work queue of its name. */
const ACTOR_ROLES = Object.keys(ROLE_STREAMS) as ActorRole[];

/** The durable consumers a role pulls work through: its own work queue over the log and its task
 * queues. (Ordered consumers, which reads make, have generated names and stay open to all.) */
function ownConsumers(role: ActorRole): string[] {
  return [workQueueConsumer(role), ...ROLE_TASK_QUEUES[role].map(taskQueueConsumer)];
}

/** Every role's work consumers: each one closed to every other role. */
const WORK_CONSUMERS = [...new Set(ACTOR_ROLES.flatMap(ownConsumers))];

/**
 * What a role may not do with a work consumer that is not its own: pull items, ack them (v1 and
 * v2 ack subjects), or make or replace the consumer. Denies win over the read grants (which let
 * every role make and pull consumers, as reads do). NATS wildcards match whole tokens only, so
 * the closed consumers are named one by one.
 */
function closedConsumers(consumers: readonly string[]): string[] {
  return consumers.flatMap((c) => {
    return [
      `$JS.API.CONSUMER.MSG.NEXT.*.${c}`,
      `$JS.API.CONSUMER.CREATE.*.${c}`,
      `$JS.API.CONSUMER.CREATE.*.${c}.>`,
      `$JS.API.CONSUMER.DURABLE.CREATE.*.${c}`,
      `$JS.ACK.*.${c}.>`,
      `$JS.ACK.*.*.*.${c}.>`,
    ];
  });
}

/** The inbox prefix of a role's connection: replies to one role are not readable by another. */
export function inboxPrefixOf(role: NatsRole): string {
  return `_INBOX_${role}`;
}

/** What a role may publish and subscribe to (null: everything, the admin). */
export function rolePermissions(role: NatsRole): RolePermissions | null {
  if (role === 'admin') return null;
  const inbox = { allow: [`${inboxPrefixOf(role)}.>`] };
  if (role === 'reader') return { publish: { allow: [...READ_API], deny: closedConsumers(WORK_CONSUMERS) }, subscribe: inbox };
  const streams = ROLE_STREAMS[role].map((s) => `crucible.run.*.s.${token(s)}`);
  const own = new Set(ownConsumers(role));
  const deny = closedConsumers(WORK_CONSUMERS.filter((c) => !own.has(c)));
  return {
    publish: {
      allow: [
        ...streams,
        ...BLOB_SUBJECTS,
        `crucible.run.*.lease.${token(`role-${role}`)}`,
        ...(role === 'judge' ? JUDGE_SHARE_STREAMS.map((_, i) => `crucible.run.*.lease.${token(shareLeaseName('judge', i))}`) : []),
        'crucible.run.*.hb.*',
        // The head of its actor's snapshots (their blobs are blob subjects above).
        `crucible.run.*.head.${role}`,
        ...ROLE_TASK_QUEUES[role].map((q) => `crucible.run.*.${q}`),
        ...READ_API,
        // Workers make the board and task streams beside a run's log on first use. (A role may
        // thus create streams, never delete or purge one; and a worker opens a run's log only
        // when it exists.)
        '$JS.API.STREAM.CREATE.*',
        // Acks of claimed work items.
        '$JS.ACK.>',
      ],
      deny,
    },
    subscribe: inbox,
  };
}

/** What a credentials file holds: the role, its nkey seed, and the cluster's CA when TLS is on. */
export const NatsCredentials = z.strictObject({
  format: z.literal('crucible-nats-credentials/1'),
  role: NatsRole,
  /** The user's nkey seed ("SU..."): the secret; the server knows only its public key. */
  seed: z.string().regex(/^SU[A-Z2-7]{56}$/, 'an nkey user seed ("SU" and 56 base32 characters)'),
  /** PEM of the CA that signed the servers' certificates; null when the cluster runs without TLS. */
  ca: z.string().startsWith('-----BEGIN CERTIFICATE-----').nullable(),
});
export type NatsCredentials = z.infer<typeof NatsCredentials>;

export function credentialsFile(dir: string, role: NatsRole): string {
  return path.join(dir, `${role}.creds.json`);
}

/**
 * The credentials file a process of `role` uses, given either a directory `crucible nats up`
 * wrote (its `<role>.creds.json`) or one file (used as it is): a starter handed the directory
 * gives each worker it starts its own role's file.
 */
export function roleCredentialsFile(credsPath: string, role: NatsRole): string {
  return existsSync(credsPath) && statSync(credsPath).isDirectory() ? credentialsFile(credsPath, role) : credsPath;
}

/** The public key of a credentials' seed ("U..."), as the server config names the user. */
export function publicKeyOf(creds: NatsCredentials): string {
  return nkeys.fromSeed(new TextEncoder().encode(creds.seed)).getPublicKey();
}

/** Reads and checks a credentials file: it must be readable by its owner only (it holds a secret). */
export function readCredentials(file: string): NatsCredentials {
  if (!existsSync(file)) throw new LogCredentialsError(file, 'no such file (`crucible nats up --dir DIR` writes one per role into DIR)');
  if (statSync(file).isDirectory()) throw new LogCredentialsError(file, 'a directory: give the file of one role, e.g. <dir>/admin.creds.json');
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) !== 0)
    throw new LogCredentialsError(file, `it is readable by others (mode ${mode.toString(8).padStart(4, '0')}); it holds a secret key: chmod 600 ${file}`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new LogCredentialsError(file, `not JSON (${(err as Error).message})`);
  }
  const parsed = NatsCredentials.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new LogCredentialsError(file, `${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  try {
    publicKeyOf(parsed.data);
  } catch (err) {
    throw new LogCredentialsError(file, `seed: not a valid nkey seed (${(err as Error).message})`);
  }
  return parsed.data;
}
