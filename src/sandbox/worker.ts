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

type Pending = { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

/** One long-lived Python fork-server (inside bubblewrap when available), spoken to in JSON lines. */
export class ForkServer {
  readonly #proc: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #buf = '';
  #stderr = '';
  #dead: string | undefined;
  #workdir: string | undefined;
  /** The program the server holds compiled: a repeat load of it is skipped. */
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
      this.#pending.delete(msg.id as number);
      clearTimeout(p.timer);
      p.resolve(msg);
    }
  }

  #fail(reason: string): void {
    if (this.#dead === undefined) this.#dead = reason;
    for (const [, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new SandboxFault(this.#dead));
    }
    this.#pending.clear();
  }

  /** Sends one request; rejects with SandboxFault if the server dies or does not answer in time. */
  request(msg: Record<string, unknown>, timeoutMs: number): Promise<Record<string, unknown>> {
    if (this.#dead !== undefined) return Promise.reject(new SandboxFault(this.#dead));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#fail(`fork-server did not answer within ${timeoutMs} ms`);
        this.kill();
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      this.#proc.stdin.write(JSON.stringify({ ...msg, id }) + '\n');
    });
  }

  /** Like request, but a reply with ok=false is a SandboxFault too. */
  async call(msg: Record<string, unknown>, timeoutMs: number): Promise<Record<string, unknown>> {
    const reply = await this.request(msg, timeoutMs);
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
