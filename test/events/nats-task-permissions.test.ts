/**
 * The worker board and task queues by role, enforced by the server (real nats-server with
 * auth): the executor task queue is the executors' own (another role's pull, ack, or consumer
 * under the queue's name is refused, so a process with the solver's or the reader's
 * credentials cannot take or drop the programs the executors are to run; a task another role
 * tried to pull reaches an executor first-hand), and each singleton role takes its own lease
 * only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AckPolicy } from '@nats-io/jetstream';
import type { Status } from '@nats-io/transport-node';
import type { JetStreamEventLog } from '../../src/events/jetstream-log.js';
import { JetStreamTaskQueue, taskQueueConsumer } from '../../src/events/jetstream-tasks.js';
import { WorkerBoard } from '../../src/events/jetstream-board.js';
import { permissionFailure } from '../../src/events/nats-connect.js';
import { credentialsFile, NATS_ROLES, rolePermissions, type NatsRole } from '../../src/events/nats-auth.js';
import { natsDown, natsUp, type NatsCluster } from '../../src/events/nats-server.js';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import { leaseNameOf, PROGRAM_QUEUE } from '../../src/workers/names.js';
import { WORKER_ROLES, SHARED_ROLES } from '../../src/workers/roles.js';

let dir: string;
let cluster: NatsCluster;
const RUN = 'r-tasks';
const TASKS_STREAM = `${runStreamNames(RUN).stream}_TASKS`;
const CONSUMER = taskQueueConsumer(PROGRAM_QUEUE);
const OTHERS = NATS_ROLES.filter((r): r is Exclude<NatsRole, 'executor' | 'admin'> => r !== 'executor' && r !== 'admin');

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

describe('the executor task queue on a cluster with auth', () => {
  it('grants the executor alone pulls, acks and the consumer of the program queue', () => {
    expect(rolePermissions('executor')!.publish).not.toHaveProperty('deny');
    for (const role of OTHERS) {
      expect(rolePermissions(role)!.publish.deny).toContain(`$JS.API.CONSUMER.MSG.NEXT.*.${CONSUMER}`);
      expect(rolePermissions(role)!.publish.deny).toContain(`$JS.ACK.*.${CONSUMER}.>`);
    }
  });

  it('refuses every other role\'s pull, ack and consumer; the executor then claims the task first-hand', async () => {
    const executor = await open('executor');
    const queue = await JetStreamTaskQueue.open(executor, { name: PROGRAM_QUEUE, ackWaitMs: 30_000 });
    try {
      expect(await queue.publish(`${RUN}/t-1`, JSON.stringify({ n: 1 }))).toBe(true);
      for (const role of OTHERS) {
        const log = await open(role);
        const refused = violations(log);
        try {
          // A claim through the executors' consumer, as an executor makes it: the server drops
          // the pull and says why (the claim fails or comes back empty).
          const claimed = await settled(JetStreamTaskQueue.open(log, { name: PROGRAM_QUEUE, ackWaitMs: 30_000 }).then((q) => q.claim(1, 1000)));
          expect(Array.isArray(claimed) ? claimed : [], `${role} claimed a task`).toEqual([]);
          // An ack of a delivery (as if it had one), and the consumer made or replaced under the queue's name.
          log.connection.publish(`$JS.ACK.${TASKS_STREAM}.${CONSUMER}.1.1.1.0.0`, '+ACK');
          const made = await settled(log.jsm.consumers.add(TASKS_STREAM, { durable_name: CONSUMER, ack_policy: AckPolicy.Explicit, filter_subject: `${runStreamNames(RUN).subjectPrefix}-tasks.${PROGRAM_QUEUE}` }));
          expect(made, `${role} made the executors' consumer`).toBeInstanceOf(Error);
          await log.connection.flush();
          await new Promise((r) => setTimeout(r, 100));
          const subjects = refused.join('\n');
          expect(subjects).toContain(`$JS.API.CONSUMER.MSG.NEXT.${TASKS_STREAM}.${CONSUMER}`);
          expect(subjects).toContain(`$JS.ACK.${TASKS_STREAM}.${CONSUMER}.1.1.1.0.0`);
          expect(subjects).toContain(`$JS.API.CONSUMER.`);
        } finally {
          await log.close();
        }
      }
      // Nobody else took it: the executor's first claim gets it, delivered once.
      const [task] = await queue.claim(1, 2000);
      expect(task?.id).toBe(`${RUN}/t-1`);
      expect(task?.delivery).toBe(1);
      await task!.ack();
      expect(await queue.depth()).toEqual({ waiting: 0, claimed: 0 });
    } finally {
      await executor.close();
    }
  }, 60_000);

  it('lets each singleton role take its own lease on the worker board and no other role\'s', async () => {
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
