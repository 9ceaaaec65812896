/** A real nats-server (or three) per test file, on free loopback ports, stopped by its own pids. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { natsDown, natsUp, type NatsCluster } from '../../src/nats-ops/nats-server.js';

export interface TestNats {
  cluster: NatsCluster;
  urls: string[];
  stop(): Promise<void>;
}

export async function startTestNats(nodes: 1 | 2 | 3 = 1): Promise<TestNats> {
  const dir = mkdtempSync(path.join(tmpdir(), 'crucible-nats-'));
  const cluster = await natsUp({ nodes, dir });
  return {
    cluster,
    urls: cluster.urls,
    stop: async () => {
      await natsDown(dir).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let counter = 0;
/** Stream and subject names no other fixture of this process uses. */
export function uniqueLogNames(): { stream: string; subjectPrefix: string } {
  counter++;
  const tag = `${process.pid}_${counter}_${Math.random().toString(36).slice(2, 7)}`;
  return { stream: `T_${tag}`, subjectPrefix: `t.${tag}` };
}
