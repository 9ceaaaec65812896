/**
 * The executor task queue is the executors' own: the server refuses another role's pull, ack,
 * or consumer under the queue's name (real nats-server with auth), so a process with the solver's
 * or the reader's credentials cannot take (or drop) the programs the executors are to run. The
 * executors still claim and ack, and a task some other role tried to pull is delivered to an
 * executor first-hand.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AckPolicy } from '@nats-io/jetstream';
import type { Status } from '@nats-io/transport-node';
import type { JetStreamEventLog } from '../../src/events/jetstream-log.js';
import { JetStreamTaskQueue, taskQueueConsumer } from '../../src/events/jetstream-tasks.js';
import { credentialsFile, NATS_ROLES, rolePermissions, type NatsRole } from '../../src/events/nats-auth.js';
import { natsDown, natsUp, type NatsCluster } from '../../src/events/nats-server.js';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import { PROGRAM_QUEUE } from '../../src/workers/names.js';

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
    expect(rolePermissions('executor')!.publish.deny).toBeUndefined();
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
          // A pull through the executors' consumer: the server drops it and says why.
          const reply = log.connection.request(`$JS.API.CONSUMER.MSG.NEXT.${TASKS_STREAM}.${CONSUMER}`, JSON.stringify({ batch: 1, expires: 500_000_000 }), { timeout: 1500 });
          const pulled = await settled(reply);
          expect(pulled, `${role} pulled a task`).toBeInstanceOf(Error);
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
});
