/**
 * Starts worker processes (`crucible worker ...`) as children and keeps them running until the
 * run is complete: a child that dies before (killed, crashed) is started again, a few times per
 * role at most. Their stderr goes to one file (the progress bar owns the terminal), each line
 * stamped with its time.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { roleCredentialsFile } from '../events/jetstream/nats-roles.js';
import { createWriteStream, type WriteStream } from 'node:fs';
import path from 'node:path';
import { WORKER_ROLES, type WorkerRole } from './roles.js';
import { EXIT_READ_AGAIN, WorkerError } from './errors.js';
import { stampLines } from './stamped-lines.js';
import { PACKAGE_ROOT } from '../core/package-root.js';
import { YOUNG_GENERATION_FLAG } from '../core/node-flags.js';

/** The `crucible` entry point of this checkout. */
export const CRUCIBLE_BIN = path.join(PACKAGE_ROOT, 'bin/crucible.js');

export interface SupervisorOptions {
  location: string;
  runId: string;
  counts: Record<WorkerRole, number>;
  /** Appended to every worker's command line (e.g. --cache-dir, --creds). */
  args?: readonly string[];
  /** Credentials directory or file: each worker is given its role's file (see roleCredentialsFile). */
  credsFile?: string;
  /** Where the workers' stderr goes (appended, each line stamped with its time). */
  logFile: string;
  /** Restarts allowed per role before the run is given up. Default 5. */
  maxRestarts?: number;
  /** Workers started again per role because their log changed under them (exit status
   * EXIT_READ_AGAIN) before the run is given up. Default 20. */
  maxRereads?: number;
  say?(line: string): void;
  /** Starts one worker's command (default: here, with `spawn`); a launcher may start it on
   * another machine, e.g. through `ip netns exec` or ssh, as long as the child it returns
   * stands for the worker (it exits when the worker does). */
  launch?: WorkerLauncher;
}

export type WorkerLauncher = (worker: { role: WorkerRole; slot: number }, command: string, args: readonly string[], options: SpawnOptions) => ChildProcess;

export interface WorkerChild {
  role: WorkerRole;
  slot: number;
  process: ChildProcess;
}

export class WorkerSupervisor {
  readonly #opts: SupervisorOptions;
  readonly #children = new Map<string, WorkerChild>();
  readonly #restarts = new Map<WorkerRole, number>();
  readonly #rereads = new Map<WorkerRole, number>();
  #out: WriteStream | null = null;
  /** Children's stderr not yet closed: their last lines are still to come. */
  readonly #stderrOpen = new Set<Promise<void>>();
  #stopping = false;
  #failure: WorkerError | null = null;
  #onFailure: ((err: WorkerError) => void) | null = null;
  /** Workers that exited after RunCompleted or when stopped. */
  #exits = 0;

  constructor(opts: SupervisorOptions) {
    this.#opts = opts;
  }

  start(): void {
    this.#out = createWriteStream(this.#opts.logFile, { flags: 'a' });
    for (const role of WORKER_ROLES) for (let slot = 0; slot < this.#opts.counts[role]; slot++) this.#spawn(role, slot);
  }

  /** The live children, by role. */
  get children(): WorkerChild[] {
    return [...this.#children.values()];
  }

  /** Rejects when a role died more often than allowed. */
  failed(): Promise<never> {
    return new Promise((_, reject) => {
      if (this.#failure) reject(this.#failure);
      this.#onFailure = reject;
    });
  }

  #spawn(role: WorkerRole, slot: number): void {
    const args = [
      YOUNG_GENERATION_FLAG,
      CRUCIBLE_BIN,
      'worker',
      '--role',
      role,
      '--log',
      this.#opts.location,
      '--run',
      this.#opts.runId,
      ...(this.#opts.args ?? []),
      // `judge=K`: K live judges, each owning a share of the problems.
      ...(role === 'judge' && this.#opts.counts.judge > 1 ? ['--shares', String(this.#opts.counts.judge)] : []),
      ...(this.#opts.credsFile !== undefined ? ['--creds', roleCredentialsFile(this.#opts.credsFile, role)] : []),
    ];
    const options: SpawnOptions = { stdio: ['ignore', 'ignore', 'pipe'] };
    const child = this.#opts.launch ? this.#opts.launch({ role, slot }, process.execPath, args, options) : spawn(process.execPath, args, options);
    if (child.stderr) {
      stampLines(child.stderr, this.#out!);
      const stderr = child.stderr;
      const ended = new Promise<void>((resolve) => stderr.once('close', () => resolve()));
      this.#stderrOpen.add(ended);
      void ended.then(() => this.#stderrOpen.delete(ended));
    }
    const key = `${role}/${slot}`;
    this.#children.set(key, { role, slot, process: child });
    child.on('exit', (code, signal) => {
      if (this.#children.get(key)?.process === child) this.#children.delete(key);
      if (this.#stopping || code === 0) {
        this.#exits++;
        return;
      }
      // Its log changed under it (a cluster failing over dropped messages it had read): not a
      // failure of the worker; another reads the log again.
      if (code === EXIT_READ_AGAIN) {
        const r = (this.#rereads.get(role) ?? 0) + 1;
        this.#rereads.set(role, r);
        if (r > (this.#opts.maxRereads ?? 20)) {
          this.#failure = new WorkerError(`the ${role} worker found its log changed under it ${r} times; see ${this.#opts.logFile}`);
          this.#onFailure?.(this.#failure);
          return;
        }
        this.#opts.say?.(`${role} worker (pid ${child.pid}) read messages the log no longer holds: another reads the log again`);
        setTimeout(() => {
          if (!this.#stopping) this.#spawn(role, slot);
        }, 300);
        return;
      }
      const n = (this.#restarts.get(role) ?? 0) + 1;
      this.#restarts.set(role, n);
      const how = signal ? `was killed (${signal})` : `exited with status ${code}`;
      if (n > (this.#opts.maxRestarts ?? 5)) {
        this.#failure = new WorkerError(`the ${role} worker ${how} ${n} times; see ${this.#opts.logFile}`);
        this.#onFailure?.(this.#failure);
        return;
      }
      this.#opts.say?.(`${role} worker (pid ${child.pid}) ${how}: starting another`);
      setTimeout(() => {
        if (!this.#stopping) this.#spawn(role, slot);
      }, 300);
    });
  }

  /** Waits up to `ms` for every child to exit on its own (they stop at RunCompleted), then
   * stops the rest with SIGTERM. */
  async finish(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.#children.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await this.stop();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    const waits = this.children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.process.exitCode !== null || c.process.signalCode !== null) return resolve();
          c.process.once('exit', () => resolve());
          c.process.kill('SIGTERM');
          setTimeout(() => {
            c.process.kill('SIGKILL');
            resolve();
          }, 10_000).unref();
        }),
    );
    await Promise.all(waits);
    // The file is closed after the children's last lines (their stderr closes after they exit).
    await Promise.all(this.#stderrOpen);
    const out = this.#out;
    this.#out = null;
    if (out) await new Promise<void>((resolve) => out.end(resolve));
  }
}
