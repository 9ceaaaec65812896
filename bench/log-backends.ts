/**
 * The log on each backend, same events, same run: commits/s and events/s appended (awaited one
 * by one, and pipelined with many appends in flight) and replayed, on SQLite, on one nats-server
 * and on a 3-node R3 cluster; with the raw NATS client's publish and ordered-consumer rates on
 * the same messages as the baselines of the JetStream lines.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { headers } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { catalog } from '../src/events/catalog.js';
import { encodeCommit } from '../src/events/commit.js';
import type { NewEvent } from '../src/events/envelope.js';
import { commitPayload, connectNats, openJetStreamLog } from '../src/events/jetstream/jetstream-log.js';
import { DEFAULT_MAX_COMMIT_BYTES, MAX_COMMIT_EVENTS, type EventLog } from '../src/events/log.js';
import { natsDown, natsUp } from '../src/nats-ops/nats-server.js';
import { openSqliteLog } from '../src/events/sqlite/sqlite-log.js';
import { issueAll } from './pipeline.js';

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const WINDOW = 256;

interface Figures {
  commits: number;
  events: number;
  ms: number;
}

function row(label: string, f: Figures, baseline?: Figures): void {
  const cps = (f.commits / f.ms) * 1000;
  const eps = (f.events / f.ms) * 1000;
  const ratio = baseline ? `  ${(eps / ((baseline.events / baseline.ms) * 1000)).toFixed(2)}x raw` : '';
  console.log(`${label.padEnd(58)} ${fmt(cps).padStart(9)} commits/s ${fmt(eps).padStart(10)} events/s${ratio}`);
}

async function timed(fn: () => Promise<number | void>): Promise<{ ms: number; n: number }> {
  const t0 = performance.now();
  const n = await fn();
  return { ms: performance.now() - t0, n: n ?? 0 };
}

/** Appends commits (arrays of events), awaited one by one or `WINDOW` in flight. */
async function appendAll(log: EventLog, commits: readonly NewEvent[][], tag: string, pipelined: boolean): Promise<Figures> {
  const events = commits.reduce((a, c) => a + c.length, 0);
  const { ms } = await timed(async () => {
    await issueAll(commits.length, pipelined, WINDOW, (i) => log.append(`s/${i % 8}`, commits[i]!, { commitId: `${tag}-${i}` }));
  });
  return { commits: commits.length, events, ms };
}

async function replay(log: EventLog): Promise<Figures & { commitIds: number }> {
  let events = 0;
  const ids = new Set<string>();
  const { ms } = await timed(async () => {
    for await (const e of log.read()) {
      events++;
      ids.add(e.commitId);
    }
  });
  return { commits: ids.size, events, ms, commitIds: ids.size };
}

function chunk(events: readonly NewEvent[], size: number): NewEvent[][] {
  const out: NewEvent[][] = [];
  for (let i = 0; i < events.length; i += size) out.push(events.slice(i, i + size) as NewEvent[]);
  return out;
}

/** The raw client on the same messages: publish (awaited or pipelined) and an ordered consumer. */
class RawClient {
  private constructor(
    readonly nc: Awaited<ReturnType<typeof connectNats>>,
    readonly jsm: Awaited<ReturnType<typeof jetstreamManager>>,
    readonly replicas: number,
  ) {}

  static async open(urls: string[], replicas: number): Promise<RawClient> {
    const nc = await connectNats(urls);
    return new RawClient(nc, await jetstreamManager(nc), replicas);
  }

  static payloads(commits: readonly NewEvent[][]): Buffer[] {
    const limits = { maxCommitBytes: DEFAULT_MAX_COMMIT_BYTES, maxCommitEvents: MAX_COMMIT_EVENTS };
    return commits.map((c, i) => Buffer.from(commitPayload(encodeCommit(catalog, 's', c, `raw-${i}`, limits))));
  }

  async publish(name: string, commits: readonly NewEvent[][], payloads: readonly Buffer[], pipelined: boolean): Promise<Figures> {
    const js = jetstream(this.nc);
    await this.jsm.streams.add({ name, subjects: [`${name}.>`], num_replicas: this.replicas });
    const { ms } = await timed(async () => {
      await issueAll(payloads.length, pipelined, WINDOW, (i) => {
        const h = headers();
        h.set('Crucible-Count', String(commits[i]!.length));
        return js.publish(`${name}.s.${i % 8}`, payloads[i]!, { msgID: `${name}-${i}`, headers: h });
      });
    });
    return { commits: payloads.length, events: commits.reduce((a, c) => a + c.length, 0), ms };
  }

  /** Every message through an ordered consumer, JSON-parsing each body (what any reader must do). */
  async consume(name: string): Promise<Figures> {
    let commits = 0;
    const { ms, n } = await timed(async () => {
      const c = await jetstream(this.nc).consumers.get(name, { opt_start_seq: 1 });
      const msgs = await c.consume({ max_messages: 1000 });
      let events = 0;
      for await (const m of msgs) {
        events += (JSON.parse(Buffer.from(m.data).toString('utf8')) as { events: unknown[] }).events.length;
        commits++;
        if (m.info.pending === 0) break;
      }
      msgs.stop();
      return events;
    });
    return { commits, events: n, ms };
  }

  async close(): Promise<void> {
    await this.nc.drain();
  }
}

const best = (a: Figures | null, b: Figures): Figures => (a === null || b.ms < a.ms ? b : a);

export async function runBackendsBench(
  events: readonly NewEvent[],
  opts: { singles: number; batch: number; nodes: readonly (1 | 3)[]; repeat?: number },
): Promise<void> {
  const repeat = opts.repeat ?? 3;
  const singles = events.slice(0, opts.singles).map((e) => [e]);
  const batched = chunk(events, opts.batch);
  console.log(
    `\nlog backends: ${fmt(singles.length)} one-event commits, then ${fmt(events.length)} events in commits of ${opts.batch}; ` +
      `pipelined = ${WINDOW} appends in flight; JetStream lines: best of ${repeat}, alternating with the raw client's run`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'crucible-bench-backends-'));
  try {
    const sq = await openSqliteLog(join(dir, 'bench.db'));
    row('sqlite (FULL): append awaited, 1 event/commit', await appendAll(sq, singles, 'a1', false));
    row('sqlite (FULL): append pipelined, 1 event/commit', await appendAll(sq, singles, 'p1', true));
    await sq.close();
    const sqb = await openSqliteLog(join(dir, 'batched.db'));
    row(`sqlite (FULL): append awaited, ${opts.batch} events/commit`, await appendAll(sqb, batched, 'ab', false));
    row('sqlite: replay (log.read)', await replay(sqb));
    await sqb.close();

    for (const nodes of opts.nodes) {
      const natsDir = join(dir, `nats${nodes}`);
      const cluster = await natsUp({ nodes, dir: natsDir });
      const name = nodes === 1 ? `nats-server ${cluster.version}` : `3-node cluster R3`;
      const raw = await RawClient.open(cluster.urls, nodes);
      let serial = 0;
      try {
        const modes = [
          { label: 'append awaited, 1 event/commit', commits: singles, pipelined: false },
          { label: 'append pipelined, 1 event/commit', commits: singles, pipelined: true },
          { label: `append awaited, ${opts.batch} events/commit`, commits: batched, pipelined: false },
          { label: `append pipelined, ${opts.batch} events/commit`, commits: batched, pipelined: true },
        ];
        for (const mode of modes) {
          const payloads = RawClient.payloads(mode.commits);
          let ours: Figures | null = null;
          let base: Figures | null = null;
          let oursRead: Figures | null = null;
          let baseRead: Figures | null = null;
          for (let r = 0; r < repeat; r++) {
            const tag = `n${nodes}x${serial++}`;
            base = best(base, await raw.publish(`RAW_${tag}`, mode.commits, payloads, mode.pipelined));
            const log = await openJetStreamLog({ servers: cluster.urls, stream: `BENCH_${tag}`, subjectPrefix: `bench.${tag}`, replicas: nodes });
            ours = best(ours, await appendAll(log, mode.commits, tag, mode.pipelined));
            if (mode.pipelined && mode.commits === batched) {
              baseRead = best(baseRead, await raw.consume(`RAW_${tag}`));
              oursRead = best(oursRead, await replay(log));
            }
            await log.close();
          }
          row(`${name}: ${mode.label}`, ours!, base!);
          row(`  baseline: raw js.publish, same messages`, base!);
          if (oursRead && baseRead) {
            row(`${name}: replay (log.read: decode, upcast, validate)`, oursRead, baseRead);
            row(`  baseline: raw ordered consumer + JSON.parse`, baseRead);
          }
        }
      } finally {
        await raw.close();
        await natsDown(natsDir);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
