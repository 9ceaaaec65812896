/**
 * `bench scale --log nats|nats://...`: the same run of Code-A1's shape as on SQLite (the same
 * actors, stand-in policy and instant verdicts), its log a JetStream stream, with the raw nats.js
 * client on the same messages as the baseline of each figure:
 *  - append: the loop's results/s, commits/s and events/s, beside js.publish of the same commit
 *    payloads (same bytes, headers and subject shape; awaited one at a time, as the runtime
 *    appends on JetStream, which offers no multi-commit append) to a fresh stream of the log
 *    stream's replicas, storage and limits;
 *  - replay into all run read models from the stream, beside an ordered consumer + JSON.parse of
 *    every message; the log's own read with no read model;
 *  - bytes per result of the log's stream and its blob stream (stream info), beside the same run
 *    exported to a SQLite log (`crucible log export`);
 *  - the Judge's restart from its snapshot and from position 0 (without snapshotting as it folds:
 *    see below), folding from the stream.
 * What only a SQLite file has (its pages by table, the bytes this process writes to storage: the
 * server writes the log) is said as not measured. With `--log nats` the nats-server's own CPU over
 * the loop is read from /proc; a server given by URL may be on another machine.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type StreamConfig, type StreamInfo } from '@nats-io/jetstream';
import { DEFAULT_SNAPSHOT_EVERY, LOG_FILE, SNAPSHOTS_FILE, runExperiment, runIdOf } from '../src/actors/run.js';
import { ActorRuntime, type RestartReport } from '../src/actors/runtime.js';
import { SqliteSnapshotTable } from '../src/actors/snapshots.js';
import { judge } from '../src/actors/judge.js';
import { catalog } from '../src/events/catalog.js';
import { connectNats } from '../src/events/jetstream/jetstream-log.js';
import { credentialsFile, readCredentials } from '../src/events/jetstream/nats-roles.js';
import type { EventLog } from '../src/events/log.js';
import { openRunLog, runStreamNames } from '../src/events/open-log.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { copyRun } from '../src/events/transfer.js';
import { natsDown, natsUp, type NatsCluster } from '../src/nats-ops/nats-server.js';
import { ProjectionRunner } from '../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../src/projections/run-views.js';
import { flag } from './flags.js';
import { InstantVerdictsForBenchmark } from './orchestration.js';
import { standInRun } from './scale-policy.js';
import type { ScaleLog } from './scale-log.js';
import { jetStreamFigures, type Timed } from './scale-rates.js';
import { FULL_RUN_RESULTS, PROBLEMS, PROGRAMS, SUITES, TESTS, fraction, printBytesByType, printHeapGrowth, scaleConfig, stepPrinter } from './scale.js';

/** Messages read before they are published again: the timed publishes never wait on a read. */
const CHUNK = 2000;

const fileBytes = (p: string) => (existsSync(p) ? statSync(p).size : 0);
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const fmt = (n: number) => Math.round(n).toLocaleString('en');

/** A process's CPU seconds so far (user + system, from /proc), null where it cannot be read. */
function processCpu(pid: number, ticks: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / ticks;
  } catch {
    return null;
  }
}

function clockTicks(): number {
  const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(out.stdout?.trim());
  return Number.isInteger(n) && n > 0 ? n : 100;
}

/** A stored commit as the raw client publishes it again. */
interface StoredCommit {
  seq: number;
  subject: string;
  data: Uint8Array;
  msgId: string;
  count: string;
}

/** Messages [from, min(from + max - 1, last)] of `stream` through an ordered consumer. */
async function readChunk(js: JetStreamClient, stream: string, from: number, last: number, max: number): Promise<StoredCommit[]> {
  const consumer = await js.consumers.get(stream, { opt_start_seq: from });
  const msgs = await consumer.consume({ max_messages: 1000 });
  const out: StoredCommit[] = [];
  try {
    for await (const m of msgs) {
      if (m.seq !== from + out.length) throw new Error(`stream ${stream}: message ${m.seq} came where ${from + out.length} was expected`);
      out.push({ seq: m.seq, subject: m.subject, data: m.data, msgId: m.headers?.get('Nats-Msg-Id') ?? '', count: m.headers?.get('Crucible-Count') ?? '' });
      if (m.seq >= last || out.length >= max) break;
    }
  } finally {
    msgs.stop();
  }
  return out;
}

/** The settings a raw stream copies from the log's stream: where and how it stores, its limits. */
function sameSettings(c: StreamConfig): Partial<StreamConfig> {
  return {
    storage: c.storage,
    num_replicas: c.num_replicas,
    retention: c.retention,
    discard: c.discard,
    duplicate_window: c.duplicate_window,
    max_msgs: c.max_msgs,
    max_bytes: c.max_bytes,
    max_age: c.max_age,
    max_msg_size: c.max_msg_size,
    ...(c.allow_direct !== undefined ? { allow_direct: c.allow_direct } : {}),
  };
}

interface PassCounts {
  events: number;
  results: number;
  evaluated: number;
  reused: number;
  /** Per event type: events, its JSON in the message, its data's JSON. */
  byType: Map<string, { events: number; row: number; data: number }>;
  rawPublish: Timed;
}

/**
 * One pass over the log's stream, a chunk at a time: what it holds (events, results, bytes by
 * type; not timed), then the chunk published again by the raw client to `raw` (timed).
 */
async function countAndRepublish(
  js: JetStreamClient,
  jsm: JetStreamManager,
  log: { name: string; prefix: string; info: StreamInfo },
  raw: { name: string; prefix: string },
): Promise<PassCounts> {
  await jsm.streams.add({ ...sameSettings(log.info.config), name: raw.name, subjects: [`${raw.prefix}.s.*`] });
  const counts: PassCounts = { events: 0, results: 0, evaluated: 0, reused: 0, byType: new Map(), rawPublish: { seconds: 0, cpu: 0 } };
  const last = log.info.state.last_seq;
  for (let from = log.info.state.first_seq; from <= last;) {
    const chunk = await readChunk(js, log.name, from, last, CHUNK);
    if (chunk.length === 0) throw new Error(`stream ${log.name}: no message from ${from} though it holds them up to ${last}`);
    from = chunk.at(-1)!.seq + 1;
    for (const m of chunk) {
      const body = JSON.parse(Buffer.from(m.data).toString('utf8')) as { events: { type: string; data: unknown }[] };
      for (const e of body.events) {
        counts.events++;
        const t = counts.byType.get(e.type) ?? { events: 0, row: 0, data: 0 };
        t.events++;
        t.row += Buffer.byteLength(JSON.stringify(e));
        t.data += Buffer.byteLength(JSON.stringify(e.data));
        counts.byType.set(e.type, t);
        if (e.type === 'ProgramExecuted') counts.results += (catalog.fromStored(e.type, e.data, {}) as { pairs: unknown[] }).pairs.length;
        else if (e.type === 'ExecutionCompleted') counts.results++;
        else if (e.type === 'ProblemEvaluated') counts.evaluated++;
        else if (e.type === 'ExecutionRequested') counts.reused += (catalog.fromStored(e.type, e.data, {}) as { reused: unknown[] }).reused.length / 2;
      }
    }
    const t = performance.now();
    const c = cpu();
    for (const m of chunk) {
      // As the log appends: its headers made per commit, its message id the commit id.
      const h = headers();
      h.set('Crucible-Count', m.count);
      await js.publish(`${raw.prefix}${m.subject.slice(log.prefix.length)}`, m.data, { msgID: m.msgId, headers: h });
    }
    counts.rawPublish.seconds += (performance.now() - t) / 1000;
    counts.rawPublish.cpu += cpu() - c;
  }
  return counts;
}

/** Every message of `stream` through an ordered consumer, each body JSON-parsed. */
async function rawRead(js: JetStreamClient, stream: string, last: number): Promise<Timed & { messages: number }> {
  const t = performance.now();
  const c = cpu();
  const consumer = await js.consumers.get(stream, { opt_start_seq: 1 });
  const msgs = await consumer.consume({ max_messages: 1000 });
  let messages = 0;
  for await (const m of msgs) {
    if (JSON.parse(Buffer.from(m.data).toString('utf8')) !== null) messages++;
    if (m.seq >= last) break;
  }
  msgs.stop();
  return { seconds: (performance.now() - t) / 1000, cpu: cpu() - c, messages };
}

export async function runJetStreamScale(args: string[], where: Exclude<ScaleLog, { kind: 'sqlite' }>): Promise<void> {
  const f = fraction(args);
  const problems = flag(args, 'problems', PROBLEMS);
  const snapshotEvery = flag(args, 'snapshot-every', DEFAULT_SNAPSHOT_EVERY);
  const keep = process.env.CRUCIBLE_BENCH_KEEP === '1';
  const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-bench-scale-'));
  const natsDir = path.join(root, 'nats');
  let local: NatsCluster | null = null;
  let nc: NatsConnection | null = null;
  let jsm: JetStreamManager | null = null;
  let log: EventLog | null = null;
  /** Streams to delete at the end: the raw client's, and the run's on a server given by --log. */
  const dropStreams: string[] = [];
  let runStreams: string | null = null;
  try {
    if (where.kind === 'local-nats') local = await natsUp({ nodes: where.nodes, dir: natsDir, auth: true });
    const servers = where.kind === 'nats' ? where.servers : local!.urls;
    const location = servers.join(',');
    const credsFile = local ? credentialsFile(natsDir, 'admin') : where.kind === 'nats' ? where.creds : undefined;
    const credentials = credsFile !== undefined ? readCredentials(credsFile) : undefined;
    const { config, steps } = scaleConfig(f, problems, root);
    const runId = runIdOf(config);
    const names = runStreamNames(runId);
    const ticks = clockTicks();
    // The servers this bench started, all of them (a cluster's replicas work too).
    const serverPids = local?.nodes.map((n) => n.pid) ?? [];
    const serverCpu = () => {
      if (serverPids.length === 0) return null;
      let sum = 0;
      for (const pid of serverPids) {
        const c = processCpu(pid, ticks);
        if (c === null) return null;
        sum += c;
      }
      return sum;
    };
    // The run's folder is a fresh temporary one, so its run id (and streams) are new.
    if (!keep && local === null) runStreams = names.stream;
    nc = await connectNats(servers, credentials ? { credentials } : {});
    jsm = await jetstreamManager(nc);
    const js = jetstream(nc);

    const t0 = performance.now();
    const c0 = cpu();
    const s0 = serverCpu();
    const { onStep, heapPerStep } = stepPrinter(t0);
    const outcome = await runExperiment({
      config,
      log: location,
      ...(credsFile !== undefined ? { credsFile } : {}),
      cacheDir: null,
      snapshotEvery,
      sandbox: new InstantVerdictsForBenchmark(),
      prepared: standInRun(problems, config.seed),
      onStep,
    });
    const s1 = serverCpu();
    const loop = { seconds: (performance.now() - t0) / 1000, cpu: cpu() - c0, serverCpu: s0 === null || s1 === null ? null : s1 - s0 };
    const info = await jsm.streams.info(names.stream);
    const blobInfo = await jsm.streams.info(`${names.stream}_BLOBS`);
    const version = nc.info?.version ?? '?';
    const rawName = `BENCH_RAW_${names.stream}`;
    dropStreams.push(rawName);
    const pass = await countAndRepublish(
      js,
      jsm,
      { name: names.stream, prefix: names.subjectPrefix, info },
      { name: rawName, prefix: `bench.raw.${names.subjectPrefix.slice('crucible.run.'.length)}` },
    );
    const rawInfo = await jsm.streams.info(rawName);
    if (rawInfo.state.messages !== info.state.messages)
      throw new Error(`the raw client stored ${rawInfo.state.messages} messages, the log's stream holds ${info.state.messages}`);
    const { results, evaluated } = pass;
    if (results === 0 || evaluated === 0) throw new Error('the run recorded no execution results or evaluated no problem');

    const fullSteps = Math.max(1, Math.round(FULL_RUN_RESULTS / (problems * PROGRAMS * SUITES * TESTS)));
    const stepsInLog = evaluated / problems;
    const fullScale = fullSteps / stepsInLog;
    const nominalPairs = evaluated * PROGRAMS * SUITES * TESTS;
    const commits = info.state.messages;
    console.log(
      `scale: fraction ${f} of a ${FULL_RUN_RESULTS.toLocaleString('en')}-pair run (${fullSteps} steps): ${steps} steps x ${problems} problems x ${PROGRAMS} programs x ${SUITES} suites x ${TESTS} tests; the log holds ${stepsInLog.toFixed(2)} steps`,
    );
    console.log(
      `  log: JetStream, nats-server ${version} at ${location} (${local ? `${local.nodes.length === 1 ? 'one server' : `${local.nodes.length} servers with cluster routes`} the bench started, auth on, its store in a temporary folder` : `given by --log${credsFile !== undefined ? ', with --creds' : ''}`}); stream ${names.stream}: ${info.config.num_replicas} replica${info.config.num_replicas === 1 ? '' : 's'}, ${info.config.storage} storage`,
    );
    console.log(
      `  ${pass.events} events in ${commits} commits, ${results} execution results (${(results / nominalPairs).toFixed(2)} per nominal pair; and ${pass.reused} pairs answered from recorded verdicts; stand-in sandbox InstantVerdictsForBenchmark, SeededStandInPolicyForBenchmark); run ${loop.seconds.toFixed(1)} s`,
    );

    // Replay into every run read model, from the stream into a fresh file.
    log = await openRunLog(location, runId, { create: false, ...(credsFile !== undefined ? { credsFile } : {}) });
    const tReplay = performance.now();
    const cReplay = cpu();
    const replayed = path.join(root, 'replayed-views.db');
    const views = await ProjectionRunner.replayInto(replayed, { log, projections: RUN_PROJECTIONS, runId });
    const replay = { seconds: (performance.now() - tReplay) / 1000, cpu: cpu() - cReplay };
    await views.close();
    const baseRead = await rawRead(js, names.stream, info.state.last_seq);
    // The log's own read (decode, checksums, upcasting) with no read model.
    const tDecode = performance.now();
    const cDecode = cpu();
    let decoded = 0;
    for await (const page of log.readPages!()) decoded += page.length;
    const decode = { seconds: (performance.now() - tDecode) / 1000, cpu: cpu() - cDecode };
    const viewBytes = fileBytes(replayed) + fileBytes(`${replayed}-wal`);

    // The same run in a SQLite log (blobs included), for its size beside the streams'.
    const exportDir = path.join(root, 'exported');
    mkdirSync(exportDir, { recursive: true });
    const sqlitePath = path.join(exportDir, LOG_FILE);
    const tExport = performance.now();
    const target = await openSqliteLog(sqlitePath, { synchronous: 'normal' });
    try {
      await copyRun(log, target, runId);
    } finally {
      await target.close();
    }
    const exportSeconds = (performance.now() - tExport) / 1000;
    const sqliteBytes = fileBytes(sqlitePath) + fileBytes(`${sqlitePath}-wal`);
    const exported = new Database(sqlitePath, { readonly: true });
    const pages = exported.prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC').all() as {
      name: string;
      bytes: number;
    }[];
    exported.close();

    const fig = jetStreamFigures({
      results,
      commits,
      events: pass.events,
      loop,
      rawPublish: pass.rawPublish,
      replay,
      rawRead: baseRead,
      streamBytes: info.state.bytes,
      blobBytes: blobInfo.state.bytes,
      sqliteBytes,
      fullScale,
    });
    const b = fig.bytesPerResult;
    console.log(
      `  log size: the log's stream ${b.stream.toFixed(1)} bytes per result (stream info: ${(info.state.bytes / 1e6).toFixed(1)} MB in ${commits} messages), its blob stream ${b.blobs.toFixed(1)} (${(blobInfo.state.bytes / 1e6).toFixed(1)} MB in ${blobInfo.state.messages} messages); both ${b.both.toFixed(1)} bytes per result (${(b.both / (nominalPairs / results)).toFixed(1)} per nominal pair) -> ${fig.gbAtFull.toFixed(2)} GB at fraction 1`,
    );
    console.log(
      `    beside: the same run exported to a SQLite log (crucible log export; blobs put in hash order, not a run's): ${b.sqlite!.toFixed(1)} bytes per result (${(sqliteBytes / 1e6).toFixed(1)} MB; exported in ${exportSeconds.toFixed(0)} s); by table or index: ${pages
        .filter((p) => p.bytes / results >= 0.5)
        .map((p) => `${p.name} ${(p.bytes / results).toFixed(1)}`)
        .join(', ')}`,
    );
    printBytesByType(pass.byType, results, "the event's JSON in its commit message; data alone");
    printHeapGrowth(heapPerStep);

    const a = fig.append;
    console.log(
      `  append, whole actor loop: ${fmt(a.resultsPerSec)} results/s, ${fmt(a.commitsPerSec)} commits/s, ${fmt(a.eventsPerSec)} events/s (CPU of this process: ${a.cpuUsPerResult.toFixed(1)} us per result; nats-server: ${a.serverCpuUsPerResult === null ? 'not measured (a server the bench did not start)' : `${a.serverCpuUsPerResult.toFixed(1)} us of CPU per result`}; the loop also stored ${blobInfo.state.messages} blob messages)`,
    );
    const r = fig.rawAppend;
    console.log(
      `    baseline, raw js.publish of the same ${commits} commit payloads, awaited one at a time, to a fresh stream of the same settings: ${fmt(r.commitsPerSec)} commits/s, ${fmt(r.eventsPerSec)} events/s (${fmt(r.resultsPerSec)} results/s; CPU ${fmt(commits / pass.rawPublish.cpu)} commits/s) -> the loop's commits at ${fig.appendOfRaw.toFixed(3)}x the raw rate`,
    );
    console.log(
      `  replay into all run read models: ${fmt(fig.replay.resultsPerSec)} results/s (${fmt(fig.replay.eventsPerSec)} events/s, ${fmt(fig.replay.commitsPerSec)} commits/s; ${fig.replay.minutesAtFull.toFixed(1)} min at fraction 1; CPU: ${fmt(fig.replay.cpuResultsPerSec)} results/s)   baseline, raw ordered consumer + JSON.parse: ${fmt(fig.rawRead.resultsPerSec)} results/s (${fmt(fig.rawRead.commitsPerSec)} messages/s; CPU: ${fmt(fig.rawRead.cpuResultsPerSec)}; ${baseRead.messages} messages) -> ${fig.replayOfRaw.toFixed(2)}x of raw (CPU: ${fig.replayCpuOfRaw.toFixed(2)}x)`,
    );
    console.log(
      `  the log's own read (decode, checksums), no read model: ${fmt(results / decode.seconds)} results/s (CPU: ${fmt(results / decode.cpu)}; ${decoded} events) -> ${(baseRead.seconds / decode.seconds).toFixed(2)}x of raw (CPU: ${(baseRead.cpu / decode.cpu).toFixed(2)}x); the read models replayed: ${(viewBytes / results).toFixed(1)} bytes per result (${(viewBytes / 1e6).toFixed(1)} MB; the streams ${b.both.toFixed(1)})`,
    );

    // The snapshots of an in-process run stay in its folder's SQLite file, whatever the log.
    const snapPath = path.join(outcome.dir, SNAPSHOTS_FILE);
    const snapBytes = fileBytes(snapPath) + fileBytes(`${snapPath}-wal`);
    const snapDb = new Database(snapPath, { readonly: true });
    const snapshotSizes = snapDb.prepare('SELECT actor, length(body) AS bytes, position FROM actor_snapshots ORDER BY bytes DESC').all() as {
      actor: string;
      bytes: number;
      position: number;
    }[];
    snapDb.close();
    console.log(`  snapshots.db: ${(snapBytes / results).toFixed(1)} bytes per result (${(snapBytes / 1e6).toFixed(1)} MB, file and WAL)`);
    console.log(`  snapshots: ${snapshotSizes.map((x) => `${x.actor} ${(x.bytes / 1e6).toFixed(1)} MB at ${x.position}`).join(', ')}`);

    // Judge restart at the end, folding from the stream: from its snapshot, and from position 0
    // (baseline) with an empty snapshot table, snapshotting as it folds every N events read, as
    // the SQLite line's baseline does.
    const table = new SqliteSnapshotTable(snapPath, outcome.runId);
    const refoldFile = path.join(outcome.dir, 'refold-snapshots.db');
    const restart = async (withSnapshots: boolean) => {
      const got: RestartReport[] = [];
      rmSync(refoldFile, { force: true });
      const refoldTable = withSnapshots ? null : new SqliteSnapshotTable(refoldFile, outcome.runId);
      const runtime = new ActorRuntime(log!, outcome.runId, null as never, [judge] as never, {
        snapshots: { table: refoldTable ?? table, every: withSnapshots ? 0 : snapshotEvery },
        onRestart: (report) => got.push(report),
      });
      const t = performance.now();
      try {
        await runtime.start();
      } finally {
        refoldTable?.close();
        for (const suffix of ['', '-wal', '-shm']) rmSync(refoldFile + suffix, { force: true });
      }
      const held = (runtime.indexOf('judge') as { heldEntries?: number } | undefined)?.heldEntries ?? 0;
      return { ms: performance.now() - t, folded: got.reduce((n, x) => n + x.eventsFolded, 0), held };
    };
    try {
      const fromSnapshot = await restart(true);
      console.log(`  Judge restart at the end: from its snapshot ${fromSnapshot.ms.toFixed(0)} ms (${fromSnapshot.folded} events folded from the stream)`);
      const fromZero = await restart(false);
      console.log(
        `  baseline, Judge restart from position 0, snapshotting as it folds every ${snapshotEvery} events: ${fromZero.ms.toFixed(0)} ms (${fromZero.folded} events; ${fromZero.held} entries held at its end)`,
      );
    } finally {
      table.close();
    }
    console.log(
      `  not measured on JetStream: the log file's pages by table (the stream is the server's; the exported SQLite log's are above), bytes written to storage by the loop and by the Judge's refold (/proc io of this process; the server writes the log)`,
    );
  } finally {
    await log?.close();
    if (jsm) {
      // The run's log, its blobs and whatever else it made under its stream's name.
      if (runStreams !== null)
        for await (const name of jsm.streams.names()) if (name === runStreams || name.startsWith(`${runStreams}_`)) dropStreams.push(name);
      for (const name of dropStreams) await jsm.streams.delete(name).catch(() => false);
    }
    await nc?.close();
    if (local) await natsDown(natsDir, { wipe: !keep });
    // CRUCIBLE_BENCH_KEEP=1 keeps the run's folder (and, on a server given by --log, its streams).
    if (keep) console.log(`  kept: ${root}`);
    else rmSync(root, { recursive: true, force: true });
  }
}
