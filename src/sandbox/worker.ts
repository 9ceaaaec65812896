import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bwrapArgs, SERVER_IN_SANDBOX } from './isolation.js';

/** A failure of the sandbox machinery itself (not of the candidate): becomes `sandbox_error`. */
export class SandboxFault extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxFault';
  }
}

export interface WorkerOptions {
  pythonPath: string;
  serverPath: string;
  bwrap?: string;
  /** Distinct per live worker: the child's uid is uidBase + slot, so concurrent candidates
   * cannot signal or ptrace one another. */
  slot: number;
  uidBase: number;
}

type Reply = Record<string, unknown>;
interface Pending {
  resolve: (v: Reply) => void;
  reject: (e: Error) => void;
  /** Lines that carry `k` are partial replies (one per test of a `run`). */
  onPart?: (part: Reply) => void;
  timeoutMs: number;
}

/** One long-lived Python fork-server (inside bubblewrap when available): length-framed JSON
 * requests in, JSON lines out.
 * Requests may be queued: the server answers them in order, so it never waits for Node between
 * them. One watchdog covers the queue: the server must write a line within the oldest pending
 * request's timeout, counted from its previous line (or from when it had nothing to do). */
export class ForkServer {
  readonly #proc: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #watchdog: NodeJS.Timeout | undefined;
  #watchdogMs = 0;
  #buf = '';
  #stderr = '';
  #dead: string | undefined;
  #workdir: string | undefined;
  /** Key of the program the server will hold once it has read every request sent so far: a
   * request for the same program need not carry its source. */
  loadedKey: string | undefined;

  constructor(readonly opts: WorkerOptions) {
    const env: Record<string, string> = {
      PATH: '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      CRUCIBLE_SLOT: String(opts.slot),
      CRUCIBLE_UID_BASE: String(opts.uidBase),
    };
    let cmd: string;
    let args: string[];
    if (opts.bwrap) {
      cmd = opts.bwrap;
      env.CRUCIBLE_WORKDIR = '/tmp/runs';
      args = [...bwrapArgs(opts.pythonPath, opts.serverPath), opts.pythonPath, '-I', SERVER_IN_SANDBOX];
    } else {
      const work = path.join(os.tmpdir(), `crucible-sandbox-${process.pid}-${opts.slot}`);
      mkdirSync(work, { recursive: true, mode: 0o755 });
      this.#workdir = work;
      env.CRUCIBLE_WORKDIR = work;
      cmd = opts.pythonPath;
      args = ['-I', opts.serverPath];
    }
    this.#proc = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.#proc.stdout.setEncoding('utf8');
    this.#proc.stdout.on('data', (chunk: string) => this.#onData(chunk));
    this.#proc.stderr.setEncoding('utf8');
    this.#proc.stderr.on('data', (c: string) => {
      this.#stderr = (this.#stderr + c).slice(-2000);
    });
    this.#proc.stdin.on('error', () => undefined);
    this.#proc.on('error', (e) => this.#fail(`fork-server could not start: ${e.message}`));
    this.#proc.on('exit', (code, sig) => {
      // Without bubblewrap the run directories live on the host: leave nothing behind.
      if (this.#workdir) rmSync(this.#workdir, { recursive: true, force: true });
      this.#fail(`fork-server exited (${sig ?? code})${this.#stderr ? ': ' + this.#stderr.trim().split('\n').pop() : ''}`);
    });
  }

  get alive(): boolean {
    return this.#dead === undefined;
  }

  #onData(chunk: string): void {
    this.#buf += chunk;
    let nl: number;
    while ((nl = this.#buf.indexOf('\n')) >= 0) {
      const line = this.#buf.slice(0, nl);
      this.#buf = this.#buf.slice(nl + 1);
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        this.#fail(`fork-server wrote a line that is not JSON: ${line.slice(0, 200)}`);
        this.kill();
        return;
      }
      const p = this.#pending.get(msg.id as number);
      if (!p) continue;
      if ('k' in msg) {
        this.#arm();
        p.onPart?.(msg);
        continue;
      }
      this.#pending.delete(msg.id as number);
      this.#arm();
      p.resolve(msg);
    }
  }

  /** (Re)starts the watchdog for the oldest pending request; refreshing the timer it has is
   * cheaper than a new one per line. */
  #arm(): void {
    const head = this.#pending.values().next().value;
    if (!head) return this.#disarm();
    if (this.#watchdog && this.#watchdogMs === head.timeoutMs) {
      this.#watchdog.refresh();
      return;
    }
    this.#disarm();
    const ms = (this.#watchdogMs = head.timeoutMs);
    this.#watchdog = setTimeout(() => {
      this.#fail(`fork-server did not answer within ${ms} ms`);
      this.kill();
    }, ms);
  }

  #disarm(): void {
    if (this.#watchdog) clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
  }

  #fail(reason: string): void {
    if (this.#dead === undefined) this.#dead = reason;
    this.#disarm();
    for (const [, p] of this.#pending) p.reject(new SandboxFault(this.#dead));
    this.#pending.clear();
  }

  /** Requests not yet answered (queued or running). */
  get pending(): number {
    return this.#pending.size;
  }

  /** Sends one request; rejects with SandboxFault if the server dies or stops answering.
   * `onPart` receives the partial replies of a `run` (one per test, as each finishes). */
  request(msg: Reply, timeoutMs: number, onPart?: (part: Reply) => void): Promise<Reply> {
    if (this.#dead !== undefined) return Promise.reject(new SandboxFault(this.#dead));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      // Length-framed, so the server reads exactly one request and nothing queued behind it.
      const body = Buffer.from(JSON.stringify({ ...msg, id }));
      if (body.length > 999_999_999) return reject(new SandboxFault(`request of ${body.length} bytes is over the 999999999-byte frame limit`));
      this.#pending.set(id, { resolve, reject, timeoutMs, ...(onPart ? { onPart } : {}) });
      if (this.#pending.size === 1) this.#arm();
      this.#proc.stdin.write(Buffer.concat([Buffer.from(`${String(body.length).padStart(9, '0')}\n`), body]));
    });
  }

  /** Like request, but a reply with ok=false is a SandboxFault too (a compile error is not). */
  async call(msg: Reply, timeoutMs: number, onPart?: (part: Reply) => void): Promise<Reply> {
    const reply = await this.request(msg, timeoutMs, onPart);
    if (reply.ok !== true && !('compile_error' in reply)) throw new SandboxFault(`fork-server: ${String(reply.error)}`);
    return reply;
  }

  kill(): void {
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) this.#proc.kill('SIGKILL');
  }

  async close(): Promise<void> {
    if (this.#proc.exitCode !== null || this.#proc.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.#proc.once('exit', () => r()));
    this.#proc.stdin.end();
    const t = setTimeout(() => this.kill(), 2000);
    await exited;
    clearTimeout(t);
  }
}
