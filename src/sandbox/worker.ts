import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bwrapArgs, SERVER_IN_SANDBOX } from './isolation.js';
import { cgroupWrapper, makeServerCgroup, removeServerCgroup, type CgroupRoots, type ServerCgroup } from './cgroup.js';

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
  /** Where to make this server's memory and pids cgroups; none: RLIMIT_AS only. */
  cgroup?: CgroupRoots;
}

type Reply = Record<string, unknown>;

/** Where a server's memory cgroup is mounted inside bubblewrap (root-owned: children only read). */
const CGROUP_IN_SANDBOX = '/crucible-cg';
let serial = 0;
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
  readonly #chunks: Buffer[] = [];
  #have = 0;
  /** Bytes of the frame being read; -1 while its header is awaited. */
  #need = -1;
  #stderr = '';
  #dead: string | undefined;
  #workdir: string | undefined;
  readonly #cgroup: ServerCgroup | undefined;
  #cgroupGone: Promise<void> = Promise.resolve();

  constructor(readonly opts: WorkerOptions) {
    const env: Record<string, string> = {
      PATH: '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      CRUCIBLE_SLOT: String(opts.slot),
      CRUCIBLE_UID_BASE: String(opts.uidBase),
    };
    this.#cgroup = opts.cgroup ? makeServerCgroup(opts.cgroup, `crucible-${process.pid}-${opts.slot}-${serial++}`) : undefined;
    let cmd: string;
    let args: string[];
    if (opts.bwrap) {
      cmd = opts.bwrap;
      env.CRUCIBLE_WORKDIR = '/tmp/runs';
      env.CRUCIBLE_BWRAP = '1';
      const binds = this.#cgroup ? ['--bind', this.#cgroup.memory, CGROUP_IN_SANDBOX] : [];
      if (this.#cgroup) env.CRUCIBLE_CG_MEMORY = CGROUP_IN_SANDBOX;
      args = [...bwrapArgs(opts.pythonPath, opts.serverPath, binds), opts.pythonPath, '-I', '-B', SERVER_IN_SANDBOX];
    } else {
      const work = path.join(os.tmpdir(), `crucible-sandbox-${process.pid}-${opts.slot}`);
      mkdirSync(work, { recursive: true, mode: 0o755 });
      this.#workdir = work;
      env.CRUCIBLE_WORKDIR = work;
      if (this.#cgroup) env.CRUCIBLE_CG_MEMORY = this.#cgroup.memory;
      cmd = opts.pythonPath;
      // -B: the package's bytecode is never written beside its sources.
      args = ['-I', '-B', opts.serverPath];
    }
    if (this.#cgroup) ({ cmd, args } = cgroupWrapper(this.#cgroup, cmd, args));
    this.#proc = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.#proc.stdout.on('data', (chunk: Buffer) => this.#onData(chunk));
    this.#proc.stderr.setEncoding('utf8');
    this.#proc.stderr.on('data', (c: string) => {
      this.#stderr = (this.#stderr + c).slice(-2000);
    });
    this.#proc.stdin.on('error', () => undefined);
    this.#proc.on('error', (e) => this.#fail(`fork-server could not start: ${e.message}`));
    this.#proc.on('exit', (code, sig) => {
      // Without bubblewrap the run directories live on the host: leave nothing behind.
      if (this.#workdir) rmSync(this.#workdir, { recursive: true, force: true });
      if (this.#cgroup) this.#cgroupGone = removeServerCgroup(this.#cgroup);
      this.#fail(`fork-server exited (${sig ?? code})${this.#stderr ? ': ' + this.#stderr.trim().split('\n').pop() : ''}`);
    });
  }

  get alive(): boolean {
    return this.#dead === undefined;
  }

  /** Frames (9-digit length, newline, JSON) are cut from a queue of chunks: each byte is copied
   * once, however the frames fall across chunks, so a large reply costs linear time. */
  #onData(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#have += chunk.length;
    for (;;) {
      if (this.#need < 0) {
        if (this.#have < 10) return;
        const head = this.#take(10).toString('latin1');
        if (!/^\d{9}\n$/.test(head)) {
          this.#fail(`fork-server wrote a frame without a length header: ${JSON.stringify(head)}`);
          this.kill();
          return;
        }
        this.#need = Number(head.slice(0, 9));
      }
      if (this.#have < this.#need) return;
      const body = this.#take(this.#need);
      this.#need = -1;
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      } catch {
        // Also a frame too large for a string: the server bounds values before sending them.
        this.#fail(`fork-server wrote a frame that is not JSON: ${body.subarray(0, 200).toString('utf8')}`);
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

  /** The next n buffered bytes (n <= #have), consumed. */
  #take(n: number): Buffer {
    const first = this.#chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      this.#have -= n;
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let got = 0;
    while (got < n) {
      const c = this.#chunks[0]!;
      const k = Math.min(c.length, n - got);
      c.copy(out, got, 0, k);
      got += k;
      if (k === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(k);
    }
    this.#have -= n;
    return out;
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
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) {
      const exited = new Promise<void>((r) => this.#proc.once('exit', () => r()));
      this.#proc.stdin.end();
      const t = setTimeout(() => this.kill(), 2000);
      await exited;
      clearTimeout(t);
    }
    await this.#cgroupGone;
  }
}
