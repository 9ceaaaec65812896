/**
 * `bench scale --log`: which log the run is made on, read from the arguments (the bench itself is
 * not run), and its JetStream figures' arithmetic on hand-made counts.
 */
import { describe, expect, it } from 'vitest';
import { parseScaleLog } from '../../bench/scale-log.js';
import { jetStreamFigures, type JetStreamCounts } from '../../bench/scale-rates.js';
import { UserError } from '../../src/cli/errors.js';

describe('bench scale --log', () => {
  it('is the SQLite log when absent', () => {
    expect(parseScaleLog(['--fraction', '0.02'])).toEqual({ kind: 'sqlite' });
  });

  it('"nats" is a server the bench starts, or three with --nodes 3', () => {
    expect(parseScaleLog(['--fraction', '0.02', '--log', 'nats'])).toEqual({ kind: 'local-nats', nodes: 1 });
    expect(parseScaleLog(['--log', 'nats', '--nodes', '3'])).toEqual({ kind: 'local-nats', nodes: 3 });
    expect(parseScaleLog(['--nodes', '1', '--log', 'nats'])).toEqual({ kind: 'local-nats', nodes: 1 });
  });

  it('--creds goes with a server given as nats://, --nodes with the servers it starts', () => {
    expect(parseScaleLog(['--log', 'nats://a:4222', '--creds', '.nats/admin.creds.json'])).toEqual({
      kind: 'nats',
      servers: ['nats://a:4222'],
      creds: '.nats/admin.creds.json',
    });
    expect(() => parseScaleLog(['--log', 'nats', '--creds', 'x.json'])).toThrow('bench scale: --creds is for a server given as nats://HOST:PORT');
    expect(() => parseScaleLog(['--log', 'nats://a:4222', '--nodes', '3'])).toThrow('bench scale: --nodes is for the servers --log nats starts');
    expect(() => parseScaleLog(['--log', 'nats', '--nodes', '2'])).toThrow('bench scale: --nodes 2: expected 1 or 3');
    expect(() => parseScaleLog(['--nodes', '3'])).toThrow('bench scale: --nodes is for a run on JetStream: give --log too');
    expect(() => parseScaleLog(['--creds', 'x.json'])).toThrow('bench scale: --creds is for a run on JetStream: give --log too');
    expect(() => parseScaleLog(['--log', 'nats://a:4222', '--creds'])).toThrow('bench scale: --creds needs a value');
    expect(() => parseScaleLog(['--log', 'nats', '--nodes', '3', '--nodes', '3'])).toThrow('bench scale: --nodes is given twice');
  });

  it('takes a server or a cluster as nats://HOST:PORT, a scheme on the first or on each', () => {
    expect(parseScaleLog(['--log', 'nats://127.0.0.1:4222'])).toEqual({ kind: 'nats', servers: ['nats://127.0.0.1:4222'] });
    expect(parseScaleLog(['--log', 'nats://a:4222,b:4223,nats://c.example:4224'])).toEqual({
      kind: 'nats',
      servers: ['nats://a:4222', 'nats://b:4223', 'nats://c.example:4224'],
    });
  });

  it.each([
    ['sqlite', '--log takes "nats" (a local nats-server the bench starts) or nats://HOST:PORT[,HOST:PORT...] (a running server or cluster), got "sqlite"'],
    ['http://a:4222', 'got "http://a:4222"'],
    ['nats://a', 'got "nats://a": "nats://a" is not HOST:PORT'],
    ['nats://a:4222,b', 'got "nats://a:4222,b": "b" is not HOST:PORT'],
    ['nats://a:99999', '"nats://a:99999" is not HOST:PORT'],
    ['nats://a:4222/stream', '"nats://a:4222/stream" is not HOST:PORT'],
    ['nats://user:pw@a:4222', '"nats://user:pw@a:4222" is not HOST:PORT'],
  ])('refuses --log %s, naming the flag and the value', (value, message) => {
    const call = () => parseScaleLog(['--fraction', '0.02', '--log', value]);
    expect(call).toThrow(UserError);
    expect(call).toThrow(`bench scale: --log`);
    expect(call).toThrow(message);
  });

  it('refuses --log without a value', () => {
    expect(() => parseScaleLog(['--log'])).toThrow('bench scale: --log needs a value: "nats" (a local nats-server the bench starts) or nats://');
    expect(() => parseScaleLog(['--log', '--fraction', '0.02'])).toThrow('bench scale: --log needs a value');
  });

  it('refuses --log given twice', () => {
    expect(() => parseScaleLog(['--log', 'nats', '--log', 'nats://a:4222'])).toThrow('bench scale: --log is given twice');
  });

  it('refuses --dir and --measure with --log: they resume or measure a SQLite file', () => {
    expect(() => parseScaleLog(['--log', 'nats', '--dir', 'runs/x'])).toThrow('bench scale: --dir is for a run on the SQLite log, not with --log nats');
    expect(() => parseScaleLog(['--dir', 'runs/x', '--measure', '--log', 'nats://a:4222'])).toThrow('bench scale: --dir is for a run on the SQLite log');
    expect(parseScaleLog(['--dir', 'runs/x', '--measure'])).toEqual({ kind: 'sqlite' });
  });
});

describe("bench scale on JetStream: its figures' arithmetic", () => {
  const counts: JetStreamCounts = {
    results: 1_000_000,
    commits: 10_000,
    events: 50_000,
    loop: { seconds: 200, cpu: 150, serverCpu: 40 },
    rawPublish: { seconds: 5, cpu: 2 },
    replay: { seconds: 10, cpu: 8 },
    rawRead: { seconds: 2, cpu: 1 },
    streamBytes: 150_000_000,
    blobBytes: 250_000_000,
    sqliteBytes: 130_000_000,
    fullScale: 50,
  };

  it('rates of the loop, the raw client and the replay, and each over its baseline', () => {
    const f = jetStreamFigures(counts);
    expect(f.append).toEqual({ resultsPerSec: 5000, commitsPerSec: 50, eventsPerSec: 250, cpuUsPerResult: 150, serverCpuUsPerResult: 40 });
    expect(f.rawAppend).toEqual({ resultsPerSec: 200_000, commitsPerSec: 2000, eventsPerSec: 10_000 });
    expect(f.appendOfRaw).toBe(0.025);
    expect(f.replay).toEqual({ resultsPerSec: 100_000, commitsPerSec: 1000, eventsPerSec: 5000, cpuResultsPerSec: 125_000, minutesAtFull: (10 * 50) / 60 });
    expect(f.rawRead).toEqual({ resultsPerSec: 500_000, commitsPerSec: 5000, eventsPerSec: 25_000, cpuResultsPerSec: 1_000_000 });
    expect(f.replayOfRaw).toBe(0.2);
    expect(f.replayCpuOfRaw).toBe(0.125);
  });

  it('bytes per result of each stream, both, the SQLite export, and at fraction 1', () => {
    const f = jetStreamFigures(counts);
    expect(f.bytesPerResult).toEqual({ stream: 150, blobs: 250, both: 400, sqlite: 130 });
    expect(f.gbAtFull).toBe(20);
  });

  it('says the server CPU and the SQLite size are unknown when they were not measured', () => {
    const f = jetStreamFigures({ ...counts, loop: { ...counts.loop, serverCpu: null }, sqliteBytes: null });
    expect(f.append.serverCpuUsPerResult).toBeNull();
    expect(f.bytesPerResult.sqlite).toBeNull();
  });

  it('refuses counts it cannot make rates of, naming which', () => {
    expect(() => jetStreamFigures({ ...counts, replay: { seconds: 0, cpu: 1 } })).toThrow('replay: expected seconds > 0');
    expect(() => jetStreamFigures({ ...counts, results: 0 })).toThrow('expected results and commits > 0, got 0 and 10000');
  });
});
