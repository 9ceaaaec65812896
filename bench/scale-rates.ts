/**
 * `bench scale --log nats...`: its figures from what it counted and timed, each beside the raw
 * nats.js client's on the same messages. Pure arithmetic, so that it is tested on its own.
 */

/** Work done in `seconds` of wall time and `cpu` seconds of this process's CPU. */
export interface Timed {
  seconds: number;
  cpu: number;
}

export interface JetStreamCounts {
  /** Execution results the log holds. */
  results: number;
  /** Messages of the log's stream (one per commit) and the events they hold. */
  commits: number;
  events: number;
  /** The whole actor loop; `serverCpu`: the nats-server's CPU seconds over it, null when not known
   * (a server the bench did not start). */
  loop: Timed & { serverCpu: number | null };
  /** The raw client publishing the same commit payloads. */
  rawPublish: Timed;
  replay: Timed;
  /** The raw client's ordered consumer + JSON.parse of every message. */
  rawRead: Timed;
  /** Bytes of the log's stream and of its blob stream (stream info); of the same run exported to
   * a SQLite log, null when not measured. */
  streamBytes: number;
  blobBytes: number;
  sqliteBytes: number | null;
  /** The whole run over the run measured (steps over steps). */
  fullScale: number;
}

export interface Rates {
  resultsPerSec: number;
  commitsPerSec: number;
  eventsPerSec: number;
}

export interface JetStreamFigures {
  append: Rates & { cpuUsPerResult: number; serverCpuUsPerResult: number | null };
  rawAppend: Rates;
  /** The loop's rate over the raw client's (the same commits in both). */
  appendOfRaw: number;
  replay: Rates & { cpuResultsPerSec: number; minutesAtFull: number };
  rawRead: Rates & { cpuResultsPerSec: number };
  /** Replay's rate over the raw read's, by wall time and by CPU. */
  replayOfRaw: number;
  replayCpuOfRaw: number;
  bytesPerResult: { stream: number; blobs: number; both: number; sqlite: number | null };
  /** The log's and blob streams' bytes at fraction 1, in GB. */
  gbAtFull: number;
}

function rates(c: { results: number; commits: number; events: number }, seconds: number): Rates {
  return { resultsPerSec: c.results / seconds, commitsPerSec: c.commits / seconds, eventsPerSec: c.events / seconds };
}

export function jetStreamFigures(c: JetStreamCounts): JetStreamFigures {
  for (const [name, t] of Object.entries({ loop: c.loop, rawPublish: c.rawPublish, replay: c.replay, rawRead: c.rawRead }))
    if (!(t.seconds > 0) || !(t.cpu >= 0)) throw new Error(`${name}: expected seconds > 0 and cpu >= 0, got ${t.seconds} s and ${t.cpu} s of CPU`);
  if (!(c.results > 0) || !(c.commits > 0)) throw new Error(`expected results and commits > 0, got ${c.results} and ${c.commits}`);
  const both = c.streamBytes + c.blobBytes;
  return {
    append: {
      ...rates(c, c.loop.seconds),
      cpuUsPerResult: (c.loop.cpu * 1e6) / c.results,
      serverCpuUsPerResult: c.loop.serverCpu === null ? null : (c.loop.serverCpu * 1e6) / c.results,
    },
    rawAppend: rates(c, c.rawPublish.seconds),
    appendOfRaw: c.rawPublish.seconds / c.loop.seconds,
    replay: { ...rates(c, c.replay.seconds), cpuResultsPerSec: c.results / c.replay.cpu, minutesAtFull: (c.replay.seconds * c.fullScale) / 60 },
    rawRead: { ...rates(c, c.rawRead.seconds), cpuResultsPerSec: c.results / c.rawRead.cpu },
    replayOfRaw: c.rawRead.seconds / c.replay.seconds,
    replayCpuOfRaw: c.rawRead.cpu / c.replay.cpu,
    bytesPerResult: {
      stream: c.streamBytes / c.results,
      blobs: c.blobBytes / c.results,
      both: both / c.results,
      sqlite: c.sqliteBytes === null ? null : c.sqliteBytes / c.results,
    },
    gbAtFull: (both * c.fullScale) / 1e9,
  };
}
