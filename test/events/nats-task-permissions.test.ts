/**
 * The worker board and work queues by role, enforced by the server (real nats-server with
 * auth): each task queue (programs, solutions, suites) is its role's own, and so is the work
 * queue over the log named after a role. Another role's pull, ack, or consumer under the
 * queue's name is refused, so a process with the solver's or the reader's credentials cannot
 * take or drop the programs the executors are to run (nor an executor the solver's sampling);
 * an item another role tried to pull reaches its own role first-hand. Each singleton role takes
 * its own lease only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AckPolicy } from '@nats-io/jetstream';
import type { Status } from '@nats-io/transport-node';
import type { JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import { JetStreamTaskQueue, taskQueueConsumer } from '../../src/events/jetstream/jetstream-tasks.js';
import { workQueueConsumer } from '../../src/events/jetstream/jetstream-queue.js';
import type { WorkQueue } from '../../src/events/work-queue.js';
import { makeEvent } from '../../src/events/catalog.js';
import { WorkerBoard } from '../../src/events/jetstream/jetstream-board.js';
import { permissionFailure } from '../../src/events/jetstream/nats-connect.js';
import {
  credentialsFile,
  NATS_ROLES,
  ROLE_STREAMS,
  ROLE_TASK_QUEUES,
  rolePermissions,
  type ActorRole,
  type NatsRole,
} from '../../src/events/jetstream/nats-roles.js';
import { natsDown, natsUp, type NatsCluster } from '../../src/nats-ops/nats-server.js';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import { leaseNameOf, PROGRAM_QUEUE, SAMPLE_QUEUES } from '../../src/workers/names.js';
import { WORKER_ROLES, SHARED_ROLES } from '../../src/workers/roles.js';

let dir: string;
let cluster: NatsCluster;
const RUN = 'r-tasks';
/** Each task queue's stream (jetstream-tasks.ts). */
const tasksStream = (name: string) => `${runStreamNames(RUN).stream}_TASKS_${name}`;
const ACTORS = Object.keys(ROLE_STREAMS) as ActorRole[];

/** Every queue a role works: the task queues of the shared roles and each role's work queue over
 * the log (named after the role), with the consumer the permissions name. */
interface Queue {
  kind: 'task' | 'log';
  name: string;
  owner: ActorRole;
  stream: string;
  consumer: string;
  filter: string;
  open(log: JetStreamEventLog): Promise<JetStreamTaskQueue | WorkQueue>;
}
const QUEUES: Queue[] = [
  ...ACTORS.flatMap((owner) =>
    ROLE_TASK_QUEUES[owner].map((name): Queue => ({
      kind: 'task',
      name,
      owner,
      stream: tasksStream(name),
      consumer: taskQueueConsumer(name),
      filter: `${runStreamNames(RUN).subjectPrefix}-tasks.${name}`,
      open: (log) => JetStreamTaskQueue.open(log, { name, ackWaitMs: 30_000 }),
    })),
  ),
  ...ACTORS.map((owner): Queue => ({
    kind: 'log',
    name: owner,
    owner,
    stream: runStreamNames(RUN).stream,
    consumer: workQueueConsumer(owner),
    filter: `${runStreamNames(RUN).subjectPrefix}.s.*`,
    open: (log) => log.workQueue({ name: owner, filter: { streams: ['conductor'] }, ackWaitMs: 30_000 }),
  })),
];

const open = (role: NatsRole, create = false): Promise<JetStreamEventLog> =>
  openRunLog(cluster.urls.join(','), RUN, { credsFile: credentialsFile(dir, role), create, jetstream: { retryForMs: 3000 } }) as Promise<JetStreamEventLog>;

/** The permission violations the server reported to this connection. */
function violations(log: JetStreamEventLog): string[] {
  const out: string[] = [];
  void (async () => {
    for await (const s of log.connection.status() as AsyncIterable<Status>) {
      if (s.type === 'error' && s.error.name === 'PermissionViolationError') out.push(s.error.message);
    }
  })().catch(() => undefined);
  return out;
}

async function settled(p: Promise<unknown>): Promise<unknown> {
  try {
    return await p;
  } catch (err) {
    return err;
  }
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'crucible-task-perms-'));
  cluster = await natsUp({ nodes: 1, dir, auth: true });
  const admin = await open('admin', true);
  await admin.close();
}, 60_000);

afterAll(async () => {
  await natsDown(dir).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

describe('the work queues on a cluster with auth', () => {
  it('grants each role alone pulls, acks and the consumers of its own queues', () => {
    // The names the workers use are those the permissions close.
    expect(ROLE_TASK_QUEUES.executor).toEqual([PROGRAM_QUEUE]);
    expect(ROLE_TASK_QUEUES.solver).toEqual([SAMPLE_QUEUES.solver]);
    expect(ROLE_TASK_QUEUES.adversary).toEqual([SAMPLE_QUEUES.adversary]);
    for (const role of [...ACTORS, 'reader'] as const) {
      const deny = rolePermissions(role)!.publish.deny ?? [];
      for (const q of QUEUES) {
        const closed = deny.includes(`$JS.API.CONSUMER.MSG.NEXT.*.${q.consumer}`) && deny.includes(`$JS.ACK.*.${q.consumer}.>`);
        expect(closed, `${role} and ${q.consumer}`).toBe(q.owner !== role);
      }
    }
  });

  it("refuses every other role's pull, ack and consumer on each queue; its own role then claims the item first-hand", async () => {
    const admin = await open('admin');
    const owners = new Map<ActorRole, JetStreamEventLog>();
    try {
      // Work on every queue: a task on each task queue, a commit for the work queues over the log.
      await admin.append('conductor', [makeEvent('RunFailed', RUN, { reason: 'work for the queues' })], { commitId: `${RUN}/w-1` });
      for (const q of QUEUES) {
        if (!owners.has(q.owner)) owners.set(q.owner, await open(q.owner));
        const h = await q.open(owners.get(q.owner)!);
        if (q.kind === 'task') expect(await (h as JetStreamTaskQueue).publish(`${RUN}/t-${q.name}`, JSON.stringify({ n: 1 }))).toBe(true);
      }
      for (const role of NATS_ROLES.filter((r) => r !== 'admin')) {
        const foreign = QUEUES.filter((q) => q.owner !== role);
        const log = await open(role);
        const refused = violations(log);
        try {
          await Promise.all(
            foreign.map(async (q) => {
              // A claim through the owner's consumer, as the owner makes it: the server drops the
              // pull and says why (the claim fails or comes back empty).
              const claimed = await settled(
                q
                  .open(log)
                  .then((h): Promise<unknown[]> => (q.kind === 'task' ? (h as JetStreamTaskQueue).claim(1, 1000) : (h as WorkQueue).claim({ max: 1 }))),
              );
              expect(Array.isArray(claimed) ? claimed : [], `${role} claimed from ${q.consumer}`).toEqual([]);
              // An ack of a delivery (as if it had one), and the consumer made or replaced under its name.
              log.connection.publish(`$JS.ACK.${q.stream}.${q.consumer}.1.1.1.0.0`, '+ACK');
              const made = await settled(
                log.jsm.consumers.add(q.stream, { durable_name: q.consumer, ack_policy: AckPolicy.Explicit, filter_subject: q.filter }),
              );
              expect(made, `${role} made ${q.consumer}`).toBeInstanceOf(Error);
            }),
          );
          await log.connection.flush();
          await new Promise((r) => setTimeout(r, 100));
          const subjects = refused.join('\n');
          for (const q of foreign) {
            expect(subjects, `${role} pulling ${q.consumer}`).toContain(`$JS.API.CONSUMER.MSG.NEXT.${q.stream}.${q.consumer}`);
            expect(subjects, `${role} acking ${q.consumer}`).toContain(`$JS.ACK.${q.stream}.${q.consumer}.1.1.1.0.0`);
          }
          expect(subjects).toContain(`$JS.API.CONSUMER.`);
        } finally {
          await log.close();
        }
      }
      // Nobody else took them: each owner's first claim gets its item, delivered once.
      for (const q of QUEUES) {
        const h = await q.open(owners.get(q.owner)!);
        if (q.kind === 'task') {
          const [task] = await (h as JetStreamTaskQueue).claim(1, 2000);
          expect(task?.id, q.consumer).toBe(`${RUN}/t-${q.name}`);
          expect(task?.delivery).toBe(1);
          await task!.ack();
          expect(await (h as JetStreamTaskQueue).depth()).toEqual({ waiting: 0, claimed: 0 });
        } else {
          const [item] = await (h as WorkQueue).claim({ max: 1, waitMs: 2000 });
          expect(item?.commitId, q.consumer).toBe(`${RUN}/w-1`);
          expect(item?.delivery).toBe(1);
          await item!.ack();
        }
      }
    } finally {
      for (const log of owners.values()) await log.close();
      await admin.close();
    }
  }, 120_000);

  it("lets each singleton role take its own lease on the worker board and no other role's", async () => {
    const singletons = WORKER_ROLES.filter((r) => !SHARED_ROLES.has(r));
    for (const role of singletons) {
      const log = await open(role);
      try {
        const board = await WorkerBoard.open(log);
        const own = await board.acquire(leaseNameOf(role), `${role}-1`, 5000);
        expect(own, `${role} took its own lease`).not.toBeNull();
        await own!.release();
        const other = singletons.find((r) => r !== role)!;
        const taken = await settled(board.acquire(leaseNameOf(other), `${role}-1`, 5000));
        expect(permissionFailure(taken, role, 'take a lease'), `${role} took the ${other} lease`).not.toBeNull();
        expect(await board.holderOf(leaseNameOf(other))).toBeNull();
      } finally {
        await log.close();
      }
    }
  }, 60_000);
});
