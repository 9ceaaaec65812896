/**
 * A supervisor of the servers `nats up` started in a directory: it looks at each node every
 * `intervalMs` and starts again one whose server is gone (same config, ports and store), until
 * `nats down` stops them (it sees down's marker, or the record gone) or it is told to stop. A
 * node started again by hand counts as running.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { STOPPING, nodeRuns, readCluster, restartNode } from './nats-server.js';

export interface SuperviseEvent {
  at: string;
  kind: 'restarted' | 'restart-failed' | 'stopped-by-down';
  node?: string;
  pid?: number;
  detail?: string;
}

export interface SuperviseOptions {
  intervalMs?: number;
  /** Aborting it ends the supervision (the servers keep running). */
  signal?: AbortSignal;
  onEvent?(event: SuperviseEvent): void;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/** Supervises until `nats down` stops the servers (resolves 'down') or `signal` aborts ('aborted'). */
export async function superviseNats(dir: string, opts: SuperviseOptions = {}): Promise<'down' | 'aborted'> {
  const root = path.resolve(dir);
  const interval = opts.intervalMs ?? 1000;
  const emit = (e: Omit<SuperviseEvent, 'at'>) => opts.onEvent?.({ at: new Date().toISOString(), ...e });
  const stopping = () => existsSync(path.join(root, STOPPING)) || !existsSync(path.join(root, 'nats.json'));
  while (!opts.signal?.aborted) {
    if (stopping()) {
      emit({ kind: 'stopped-by-down' });
      return 'down';
    }
    for (const node of readCluster(root).nodes) {
      // Checked again per node: `down` may have begun since the loop's start.
      if (opts.signal?.aborted || stopping() || nodeRuns(root, node)) continue;
      try {
        const started = await restartNode(root, node.name);
        emit({ kind: 'restarted', node: node.name, pid: started.pid });
      } catch (err) {
        emit({ kind: 'restart-failed', node: node.name, detail: (err as Error).message });
      }
    }
    await sleep(interval, opts.signal);
  }
  return 'aborted';
}
