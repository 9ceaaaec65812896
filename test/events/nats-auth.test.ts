/**
 * A cluster nobody else can use: `crucible nats up` writes a user per role, the server refuses
 * clients without credentials and publishes a role may not make, each role can still do its own
 * job, and with TLS a client connects only when it trusts the cluster's CA.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEvent } from '../../src/events/catalog.js';
import { BlobCorruptError, LogAuthenticationError, LogCredentialsError, LogPermissionError } from '../../src/events/errors.js';
import { WorkerBoard } from '../../src/events/jetstream/jetstream-board.js';
import { JetStreamTaskQueue } from '../../src/events/jetstream/jetstream-tasks.js';
import { createHash } from 'node:crypto';
import { openJetStreamLog, type JetStreamEventLog } from '../../src/events/jetstream/jetstream-log.js';
import {
  NATS_ROLES,
  ROLE_STREAMS,
  credentialsFile,
  readCredentials,
  roleCredentialsFile,
  type ActorRole,
  type NatsRole,
} from '../../src/events/jetstream/nats-roles.js';
import { newCredentials } from '../../src/nats-ops/credentials.js';
import { natsDown, natsUp, readCluster, type NatsCluster } from '../../src/nats-ops/nats-server.js';
import { openRunLog, runStreamNames } from '../../src/events/open-log.js';
import { runCli } from '../support/cli.js';

const H = (c: string) => c.repeat(64);
const ACTORS = Object.keys(ROLE_STREAMS) as ActorRole[];

const solutionSampled = (runId: string) =>
  makeEvent('SolutionSampled', runId, {
    round: 1,
    problemId: 'p1',
    solutionId: 's1',
    programHash: H('a'),
    policy: { role: 'code', name: 'catalog-code', version: 0 },
    sampling: { seed: 1, index: 0, temperature: null, candidateId: 'ref', contextKey: null },
    responseHash: null,
  });
const note = (runId: string, reason: string) => makeEvent('RunFailed', runId, { reason });

async function caught(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('crucible nats up with auth (one server)', () => {
  let dir: string;
  let cluster: NatsCluster;
  const creds = (role: NatsRole) => credentialsFile(dir, role);
  const open = (role: NatsRole, runId: string, create = true): Promise<JetStreamEventLog> =>
    openRunLog(cluster.urls.join(','), runId, { credsFile: creds(role), create, jetstream: { retryForMs: 5000 } }) as Promise<JetStreamEventLog>;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'crucible-nats-auth-'));
    const { code, out } = await runCli(['nats', 'up', '--dir', dir]);
    expect(code).toBe(0);
    expect(out).toMatch(/credentials \(mode 0600/);
    cluster = readCluster(dir);
  }, 60_000);
  afterAll(async () => {
    await natsDown(dir).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes one credentials file per role, readable by its owner only, and a config without secrets of users', () => {
    expect(cluster.auth).toBe(true);
    for (const role of NATS_ROLES) {
      const file = creds(role);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const c = readCredentials(file);
      expect(c.role).toBe(role);
      // The server knows the public key only: the seed is nowhere in its config.
      expect(readFileSync(cluster.nodes[0]!.configFile, 'utf8')).not.toContain(c.seed);
    }
  });

  it('refuses a client without credentials, and one whose key it does not know', async () => {
    const none = await caught(openJetStreamLog({ servers: cluster.urls, ...runStreamNames('anon'), retryForMs: 2000 }));
    expect(none).toBeInstanceOf(LogAuthenticationError);
    expect(none.message).toMatch(/requires credentials.*--creds/);
    const stranger = await caught(
      openJetStreamLog({ servers: cluster.urls, ...runStreamNames('anon'), credentials: newCredentials('executor', null), retryForMs: 2000 }),
    );
    expect(stranger).toBeInstanceOf(LogAuthenticationError);
    expect(stranger.message).toMatch(/does not accept the executor credentials/);
  }, 30_000);

  it('refuses an executor appending a SolutionSampled to the solver stream, with a clear error, and writes nothing', async () => {
    const conductor = await open('conductor', 'r-perm');
    const executor = await open('executor', 'r-perm', false);
    try {
      const err = await caught(executor.append('solver', [solutionSampled('r-perm')], { commitId: 'forged-1' }));
      expect(err).toBeInstanceOf(LogPermissionError);
      expect(err.message).toMatch(
        /^role executor may not append to stream "solver": the server refused crucible\.run\.r-perm\.s\.\S+ \(.*Permissions Violation/,
      );
      // The solver itself may, and the forged commit left no trace.
      const solver = await open('solver', 'r-perm', false);
      await solver.append('solver', [solutionSampled('r-perm')], { commitId: 'real-1' });
      const stored = [];
      for await (const e of conductor.read({}, { streams: ['solver'] })) stored.push(e.commitId);
      expect(stored).toEqual(['real-1']);
      await solver.close();
    } finally {
      await executor.close();
      await conductor.close();
    }
  }, 30_000);

  it('lets each role append to its own stream, store blobs, read the whole log and claim work', async () => {
    const runId = 'r-roles';
    const conductor = await open('conductor', runId);
    await conductor.append('conductor', [note(runId, 'start')], { commitId: 'c-0' });
    for (const role of ACTORS) {
      const log = await open(role, runId, false);
      try {
        const r = await log.append(role, [note(runId, role)], { commitId: `own-${role}` });
        expect(r.duplicate).toBe(false);
        const hash = await log.blobs.put(`blob of ${role}`);
        expect(await log.blobs.getText(hash)).toBe(`blob of ${role}`);
        const seen = [];
        for await (const e of log.read({}, { runId })) seen.push(e.stream);
        expect(seen).toContain('conductor');
        expect(seen).toContain(role);
        // Another role's stream: refused.
        const other = ACTORS.find((a) => a !== role)!;
        expect(await caught(log.append(other, [note(runId, 'forged')], { commitId: `forged-${role}` }))).toBeInstanceOf(LogPermissionError);
        // Work: the role's own durable queue (named after it) over the conductor's stream, claimed and acked by this role.
        const queue = await log.workQueue({ name: role, filter: { streams: ['conductor'] }, ackWaitMs: 30_000 });
        // The conductor comes first, so every queue holds its two commits (a claim returns once it
        // has `max` items; the empty claim after the acks shows there was no third).
        const items = await queue.claim({ max: 2, waitMs: 2000 });
        expect(ACTORS[0]).toBe('conductor');
        expect(items.map((i) => i.commitId)).toEqual(['c-0', 'own-conductor']);
        for (const item of items) await item.ack();
        expect(await queue.claim({ max: 5, waitMs: 300 })).toEqual([]);
      } finally {
        await log.close();
      }
    }
    await conductor.close();
  }, 90_000);

  it('gives the reader reads only, and the admin every stream', async () => {
    const runId = 'r-reader';
    const admin = await open('admin', runId);
    await admin.append('judge', [note(runId, 'by admin')], { commitId: 'a-1' });
    const reader = await open('reader', runId, false);
    try {
      const seen = [];
      for await (const e of reader.read({}, { runId })) seen.push(e.commitId);
      expect(seen).toEqual(['a-1']);
      expect(await caught(reader.append('judge', [note(runId, 'x')], { commitId: 'r-1' }))).toBeInstanceOf(LogPermissionError);
      expect(await caught(reader.blobs.put('x'))).toBeInstanceOf(LogPermissionError);
    } finally {
      await reader.close();
      await admin.close();
    }
  }, 30_000);

  it('lets the actor roles create streams (workers make the board and task streams), never the reader', async () => {
    const err = await caught(open('reader', 'r-new-by-reader'));
    expect(err).toBeInstanceOf(LogPermissionError);
    expect(err.message).toMatch(/^role reader may not create the log stream "CRUCIBLE_RUN_r-new-by-reader"/);
    const made = await open('executor', 'r-new-by-executor');
    await made.close();
  }, 30_000);

  it('lets a role take only its own lease and publish only its task queues on the worker board', async () => {
    const runId = 'r-board';
    const admin = await open('admin', runId);
    const { stream, subjectPrefix } = runStreamNames(runId);
    // The board and task streams as the workers make them beside the log.
    await admin.jsm.streams.add({ name: `${stream}_WORKERS`, subjects: [`${subjectPrefix}-workers.>`] });
    await admin.jsm.streams.add({ name: `${stream}_TASKS_programs`, subjects: [`${subjectPrefix}-tasks.programs`] });
    const lease = (role: string) => `${subjectPrefix}-workers.lease.${Buffer.from(`role-${role}`).toString('base64url')}`;
    const judge = await open('judge', runId, false);
    const executor = await open('executor', runId, false);
    const solver = await open('solver', runId, false);
    const publish = (log: JetStreamEventLog, subject: string) => log.refusedAs(`publish ${subject}`, () => log.js.publish(subject, 'x'));
    try {
      await publish(judge, lease('judge'));
      expect(await caught(publish(judge, lease('learner')))).toBeInstanceOf(LogPermissionError);
      await publish(solver, `${subjectPrefix}-workers.hb.solver-1`);
      await publish(executor, `${subjectPrefix}-tasks.programs`);
      expect(await caught(publish(solver, `${subjectPrefix}-tasks.programs`))).toBeInstanceOf(LogPermissionError);
      // The head of its own actor's snapshots on the cluster, never another actor's.
      await admin.jsm.streams.add({ name: `${stream}_SNAPSHOTS`, subjects: [`${subjectPrefix}-snapshots.head.*`] });
      await publish(judge, `${subjectPrefix}-snapshots.head.judge`);
      expect(await caught(publish(judge, `${subjectPrefix}-snapshots.head.executor`))).toBeInstanceOf(LogPermissionError);
      expect(await caught(publish(executor, `${subjectPrefix}-snapshots.head.judge`))).toBeInstanceOf(LogPermissionError);
    } finally {
      await Promise.all([judge.close(), executor.close(), solver.close(), admin.close()]);
    }
  }, 30_000);

  it("stores nothing a role publishes under a run's name outside the shapes of its streams: no junk in the log, the board or the task queues", async () => {
    const runId = 'r-junk';
    const admin = await open('admin', runId);
    const { stream, subjectPrefix } = runStreamNames(runId);
    const tok = (s: string) => Buffer.from(s).toString('base64url');
    try {
      // The streams beside the log, as the workers make them.
      await WorkerBoard.open(admin);
      await JetStreamTaskQueue.open(admin, { name: 'programs' });
      const streams = [stream, `${stream}_BLOBS`, `${stream}_WORKERS`, `${stream}_TASKS_programs`];
      const counts = async () => Promise.all(streams.map(async (s) => (await admin.jsm.streams.info(s)).state.messages));
      const before = await counts();
      for (const role of ACTORS) {
        const log = await open(role, runId, false);
        try {
          // Each is granted (NATS wildcards cannot tell the run's name from its blob store's or
          // board's), and each once landed in the log stream.
          const granted = [
            `${subjectPrefix}.m.junk`,
            `${subjectPrefix}.c.junk.0`,
            `${subjectPrefix}.hb.junk`,
            `${subjectPrefix}.lease.${tok(`role-${role}`)}`,
            `${subjectPrefix}-blobs.s.${tok(role)}`,
            `${subjectPrefix}-workers.m.junk`,
            `${subjectPrefix}-tasks.m.junk`,
          ];
          for (const subject of granted) {
            // No stream takes it: the server's "no responders", which nats.js words as JetStream not enabled.
            const err = await caught(log.js.publish(subject, 'junk'));
            expect(err.message, `${role}: ${subject}`).toMatch(/no responders|jetstream is not enabled/);
          }
        } finally {
          await log.close();
        }
      }
      expect(await counts()).toEqual(before);
    } finally {
      await admin.close();
    }
  }, 60_000);

  it("junk under a blob's own subject is no blob: a get refuses it, a put stores the blob over it, a listing passes over other names", async () => {
    const runId = 'r-junk-blobs';
    const executor = await open('executor', runId);
    const { subjectPrefix } = runStreamNames(runId);
    try {
      const content = 'def f():\n    return 1\n';
      const hash = createHash('sha256').update(content).digest('hex');
      // Published first, under the blob's own message id: the put that follows is not deduplicated away.
      await executor.js.publish(`${subjectPrefix}-blobs.m.${hash}`, 'junk', { msgID: `m.${hash}` });
      await executor.js.publish(`${subjectPrefix}-blobs.m.not-a-hash`, 'junk');
      await expect(executor.blobs.get(hash)).rejects.toBeInstanceOf(BlobCorruptError);
      expect(await executor.blobs.put(content)).toBe(hash);
      const reader = await open('reader', runId, false);
      try {
        expect(await reader.blobs.getText(hash)).toBe(content);
        const listed: string[] = [];
        for await (const h of reader.blobs.list()) listed.push(h);
        expect(listed).toEqual([hash]);
      } finally {
        await reader.close();
      }
    } finally {
      await executor.close();
    }
  }, 30_000);

  it('refuses a credentials file others can read, or one that is not credentials, naming the file', () => {
    const loose = path.join(dir, 'loose.creds.json');
    writeFileSync(loose, readFileSync(creds('solver')));
    chmodSync(loose, 0o644);
    expect(() => readCredentials(loose)).toThrow(LogCredentialsError);
    expect(() => readCredentials(loose)).toThrow(/loose\.creds\.json: it is readable by others \(mode 0644\).*chmod 600/);
    const bad = path.join(dir, 'bad.creds.json');
    writeFileSync(bad, JSON.stringify({ format: 'crucible-nats-credentials/1', role: 'executor', seed: 'not-a-seed', ca: null }), { mode: 0o600 });
    expect(() => readCredentials(bad)).toThrow(/bad\.creds\.json: seed: an nkey user seed/);
    expect(() => readCredentials(path.join(dir, 'absent.json'))).toThrow(/no such file/);
    expect(() => readCredentials(dir)).toThrow(/a directory: give the file of one role/);
    // A starter handed the directory gives each process its own role's file.
    expect(roleCredentialsFile(dir, 'judge')).toBe(creds('judge'));
    expect(roleCredentialsFile(creds('admin'), 'judge')).toBe(creds('admin'));
  });

  it('keeps the credentials across a restart of the cluster, so handed-out files stay valid', async () => {
    const before = readFileSync(creds('judge'), 'utf8');
    await natsDown(dir);
    cluster = await natsUp({ nodes: 1, dir, auth: true });
    expect(readFileSync(creds('judge'), 'utf8')).toBe(before);
    const log = await open('judge', 'r-roles', false);
    await log.append('judge', [note('r-roles', 'after restart')], { commitId: 'after-restart' });
    await log.close();
  }, 60_000);

  it('refuses --tls with --no-auth, since the CA travels in the credentials', async () => {
    await expect(runCli(['nats', 'up', '--dir', path.join(dir, 'tls-no-auth'), '--tls', '--no-auth'])).rejects.toThrow(/--tls needs auth/);
  });

  it('`crucible run --creds` without --log says what is missing', async () => {
    await expect(runCli(['run', 'configs/demo.yaml', '--creds', creds('admin')])).rejects.toThrow(/--creds is for a log on JetStream: give --log/);
  });
});

describe('crucible nats up --tls', () => {
  let dir: string;
  let cluster: NatsCluster;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'crucible-nats-tls-'));
    const { code, out } = await runCli(['nats', 'up', '--dir', dir, '--tls']);
    expect(code).toBe(0);
    expect(out).toMatch(/\(TLS\)/);
    cluster = readCluster(dir);
  }, 60_000);
  afterAll(async () => {
    await natsDown(dir).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('connects a role whose credentials carry the CA, and refuses one that does not trust it', async () => {
    expect(cluster.tls).toBe(true);
    const withCa = readCredentials(credentialsFile(dir, 'conductor'));
    expect(withCa.ca).toMatch(/^-----BEGIN CERTIFICATE-----/);
    const log = await openJetStreamLog({ servers: cluster.urls, ...runStreamNames('r-tls'), credentials: withCa, retryForMs: 5000 });
    await log.append('conductor', [note('r-tls', 'over TLS')], { commitId: 'tls-1' });
    await log.close();
    const err = await caught(openJetStreamLog({ servers: cluster.urls, ...runStreamNames('r-tls'), credentials: { ...withCa, ca: null }, retryForMs: 2000 }));
    expect(err).toBeInstanceOf(LogAuthenticationError);
    expect(err.message).toMatch(/TLS failed \(.*certificate.*\).*crucible nats up --tls/);
  }, 30_000);
});

describe('crucible nats up --no-auth', () => {
  it('says that anyone may connect, writes no credentials, and lets a client in without them', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crucible-nats-open-'));
    try {
      const { code, out } = await runCli(['nats', 'up', '--dir', dir, '--no-auth']);
      expect(code).toBe(0);
      expect(out).toMatch(/no auth: any client that reaches these ports may read and write every run/);
      const cluster = readCluster(dir);
      expect(cluster.auth).toBe(false);
      expect(() => readCredentials(credentialsFile(dir, 'admin'))).toThrow(/no such file/);
      const log = await openJetStreamLog({ servers: cluster.urls, ...runStreamNames('r-open') });
      await log.append('solver', [note('r-open', 'anyone')], { commitId: 'open-1' });
      await log.close();
    } finally {
      await natsDown(dir).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
