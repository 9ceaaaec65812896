/**
 * Client for a gpu-bridge: spawns `python3 -m gpu_bridge --stdio` (or connects to one listening
 * on TCP, optionally TLS, with the shared token), writes one
 * JSON line per request, matches replies to requests by id, validates every line with zod, and
 * turns every failure into a typed BridgeError (remote error, malformed line, oversized request,
 * timeout, dead process).
 */
import { spawn } from 'node:child_process';
import { connect as netConnect, type Socket } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { connect as tlsConnect } from 'node:tls';
import { PACKAGE_ROOT } from '../core/package-root.js';
import type { z } from 'zod';
import { BridgeDeadError, BridgeError, BridgeProtocolError, BridgeRemoteError, BridgeRequestTooLargeError, BridgeTimeoutError } from './errors.js';
import {
  BridgeEvent,
  GenerateResult,
  HelloResult,
  LogprobsResult,
  PolicyInfo,
  PROTOCOL_VERSION,
  PublishResult,
  Reply,
  SaveStateResult,
  ShutdownResult,
  StatusResult,
  TrainStepResult,
  type GenerateArgs,
  type LoadPolicyArgs,
  type Op,
  type TrainStepArgs,
} from './protocol.js';

/** The Python package's directory (holds `gpu_bridge/`). */
export const GPU_BRIDGE_DIR = path.join(PACKAGE_ROOT, 'gpu-bridge');
/** Debian's python3-torch only works under the system interpreter. */
export const DEFAULT_PYTHON = '/usr/bin/python3';
const DEFAULT_MAX_REQUEST_BYTES = 16 << 20;
const STDERR_TAIL = 4096;

export interface BridgeClientOptions {
  python?: string;
  /** Extra arguments after `--stdio` (e.g. `--max-request-bytes N`, `--heartbeat S`). */
  args?: string[];
  /** Replace the whole command (a bridge elsewhere, or a stand-in program in tests). */
  command?: { file: string; args: string[] };
  env?: NodeJS.ProcessEnv;
  /** Per-call timeout unless a call gives its own. */
  timeoutMs?: number;
  /** Requests larger than this are refused before sending; hello lowers it to the bridge's. */
  maxRequestBytes?: number;
  /** Declare the bridge dead (and kill it) when calls are pending and it has written no line,
   * not even a heartbeat, for this long. Off when absent; set it above the bridge's
   * `--heartbeat` interval (a bridge stuck in a CUDA call still heartbeats; a wedged process
   * does not). */
  staleAfterMs?: number;
  onEvent?: (e: BridgeEvent) => void;
  onStderr?: (chunk: string) => void;
}

export interface CallOptions {
  timeoutMs?: number;
  /** Idempotency key: a retried mutating request with the same key is answered from the bridge's
   * record instead of running twice. */
  idem?: string;
}

/** A bridge listening on TCP (`python3 -m gpu_bridge --listen HOST:PORT --token-file F`). */
export interface RemoteBridge {
  host: string;
  port: number;
  token: string;
  /** Set when the bridge runs with --cert/--key. `ca`: the certificate to trust (PEM). */
  tls?: { ca?: string | Buffer; servername?: string; rejectUnauthorized?: boolean };
}

interface Transport {
  write(line: string): void;
  end(): void;
  kill(signal?: NodeJS.Signals): void;
  pid: number | undefined;
}

interface Pending {
  op: string;
  resolve(v: unknown): void;
  reject(e: BridgeError): void;
  timer: NodeJS.Timeout | undefined;
}

export class BridgeClient {
  readonly #transport: Transport;
  readonly #pending = new Map<number, Pending>();
  /** Ids that timed out: a late reply for one is dropped, not a protocol error. */
  readonly #abandoned = new Set<number>();
  readonly #opts: BridgeClientOptions;
  #nextId = 1;
  #dead: BridgeError | null = null;
  #stderr = '';
  #maxRequestBytes: number;
  #seenAny = false;
  readonly #exited: Promise<void>;
  /** When the bridge last wrote a line (reply or event). */
  lastSeenAt = Date.now();

  private constructor(opts: BridgeClientOptions, remote?: RemoteBridge) {
    this.#opts = opts;
    this.#maxRequestBytes = opts.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    let input: NodeJS.ReadableStream;
    if (remote) {
      const where = `${remote.host}:${remote.port}`;
      const sock: Socket = remote.tls
        ? tlsConnect({
            host: remote.host,
            port: remote.port,
            ca: remote.tls.ca,
            rejectUnauthorized: remote.tls.rejectUnauthorized ?? true,
            servername: remote.tls.servername,
          })
        : netConnect({ host: remote.host, port: remote.port });
      let why = `connection to ${where} closed`;
      sock.on('error', (err) => (why = `connection to ${where} failed: ${err.message}`));
      this.#exited = new Promise((resolve) => sock.on('close', () => (this.#fail(new BridgeDeadError(why, '')), resolve())));
      this.#transport = { write: (l) => void sock.write(l), end: () => sock.end(), kill: () => sock.destroy(), pid: undefined };
      input = sock;
    } else {
      const cmd = opts.command ?? { file: opts.python ?? DEFAULT_PYTHON, args: ['-m', 'gpu_bridge', '--stdio', ...(opts.args ?? [])] };
      const env = { ...process.env, ...opts.env };
      env.PYTHONPATH = [GPU_BRIDGE_DIR, env.PYTHONPATH].filter(Boolean).join(path.delimiter);
      const child = spawn(cmd.file, cmd.args, { stdio: ['pipe', 'pipe', 'pipe'], env });
      this.#exited = new Promise((resolve) => {
        // 'close' (not 'exit'): stdout is drained by then, so a reply written just before exit
        // still reaches its caller.
        child.on('close', (code, signal) => {
          this.#fail(new BridgeDeadError(signal ? `killed by ${signal}` : `exited with code ${code}`, this.#stderr.trim()));
          resolve();
        });
        child.on('error', (err) => {
          this.#fail(new BridgeDeadError(`could not run ${cmd.file}: ${err.message}`, ''));
          resolve();
        });
      });
      child.stdin.on('error', () => {}); // EPIPE after death: reported through 'close'
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (d: string) => {
        this.#stderr = (this.#stderr + d).slice(-STDERR_TAIL);
        opts.onStderr?.(d);
      });
      this.#transport = {
        write: (l) => void child.stdin.write(l),
        end: () => child.stdin.end(),
        kill: (signal) => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        },
        pid: child.pid,
      };
      input = child.stdout;
    }
    const lines = createInterface({ input, crlfDelay: Infinity });
    lines.on('line', (line) => this.#onLine(line));
    lines.on('error', () => {}); // readline re-emits the stream's errors; death is reported by 'close'
    if (opts.staleAfterMs !== undefined) {
      const stale = opts.staleAfterMs;
      const watch = setInterval(
        () => {
          if (this.#dead) return clearInterval(watch);
          // Start-up (importing torch, loading CUDA) writes nothing: the watch begins at the first line.
          if (this.#seenAny && this.#pending.size > 0 && Date.now() - this.lastSeenAt > stale) {
            this.#fail(new BridgeDeadError(`no line (reply or heartbeat) for over ${stale} ms`, this.#stderr.trim()));
            this.kill();
            clearInterval(watch);
          }
        },
        Math.max(10, Math.floor(stale / 4)),
      );
      watch.unref();
    }
  }

  /** Connect to a bridge started with `--listen` on a GPU node; hello carries the shared token. */
  static async connect(
    remote: RemoteBridge,
    opts: Omit<BridgeClientOptions, 'python' | 'args' | 'command' | 'env'> = {},
  ): Promise<{ client: BridgeClient; hello: HelloResult }> {
    const client = new BridgeClient(opts, remote);
    try {
      const hello = await client.hello(remote.token);
      return { client, hello };
    } catch (e) {
      client.kill();
      throw e;
    }
  }

  /** Spawn a bridge without the hello exchange (the caller's first call may be anything). */
  static open(opts: BridgeClientOptions = {}): BridgeClient {
    return new BridgeClient(opts);
  }

  /** Start a bridge and check that it speaks our protocol version. */
  static async start(opts: BridgeClientOptions = {}): Promise<{ client: BridgeClient; hello: HelloResult }> {
    const client = new BridgeClient(opts);
    try {
      const hello = await client.hello();
      return { client, hello };
    } catch (e) {
      client.kill();
      throw e;
    }
  }

  get alive(): boolean {
    return this.#dead === null;
  }

  get pid(): number | undefined {
    return this.#transport.pid;
  }

  /** Send one request; resolves with the result validated by `schema`. */
  call<S extends z.ZodType>(op: Op | string, args: Record<string, unknown>, schema: S, opts: CallOptions = {}): Promise<z.infer<S>> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    const line = JSON.stringify({ v: PROTOCOL_VERSION, id, op, idem: opts.idem ?? null, args }) + '\n';
    const bytes = Buffer.byteLength(line) - 1;
    if (bytes > this.#maxRequestBytes) return Promise.reject(new BridgeRequestTooLargeError(op, bytes, this.#maxRequestBytes));
    return new Promise<z.infer<S>>((resolve, reject) => {
      const ms = opts.timeoutMs ?? this.#opts.timeoutMs ?? 600_000;
      if (this.#pending.size === 0) this.lastSeenAt = Date.now(); // idle time is not silence
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        this.#abandoned.add(id);
        reject(new BridgeTimeoutError(op, ms));
      }, ms);
      this.#pending.set(id, {
        op,
        timer,
        reject,
        resolve: (raw) => {
          const parsed = schema.safeParse(raw);
          if (parsed.success) resolve(parsed.data);
          else reject(new BridgeProtocolError(`gpu-bridge ${op} reply has an unexpected shape: ${parsed.error.message}`));
        },
      });
      this.#transport.write(line);
    });
  }

  async hello(token?: string): Promise<HelloResult> {
    const h = await this.call('hello', token === undefined ? {} : { token }, HelloResult, { timeoutMs: 120_000 });
    this.#maxRequestBytes = Math.min(this.#maxRequestBytes, h.max_request_bytes);
    return h;
  }

  loadPolicy(args: LoadPolicyArgs, opts?: CallOptions): Promise<PolicyInfo> {
    return this.call('load_policy', { ...args }, PolicyInfo, opts);
  }

  generate(args: GenerateArgs, opts?: CallOptions): Promise<GenerateResult> {
    return this.call('generate', { ...args }, GenerateResult, opts);
  }

  logprobs(
    args: { policy?: string; items: Array<{ prompt?: string; prompt_ids?: number[]; completion?: string; completion_ids?: number[] }>; reference?: boolean },
    opts?: CallOptions,
  ): Promise<LogprobsResult> {
    return this.call('logprobs', { ...args }, LogprobsResult, opts);
  }

  /** Idempotent by batch id: a retry of an applied batch answers `duplicate: true`. */
  trainStep(args: TrainStepArgs, opts?: CallOptions): Promise<TrainStepResult> {
    return this.call('train_step', { ...args }, TrainStepResult, opts);
  }

  publish(args: { policy?: string; root: string; version?: number }, opts?: CallOptions): Promise<PublishResult> {
    return this.call('publish', { ...args }, PublishResult, opts);
  }

  saveState(args: { policy?: string; path: string }, opts?: CallOptions): Promise<SaveStateResult> {
    return this.call('save_state', { ...args }, SaveStateResult, opts);
  }

  loadState(args: { policy?: string; path: string; sha256?: string }, opts?: CallOptions): Promise<PolicyInfo> {
    return this.call('load_state', { ...args }, PolicyInfo, opts);
  }

  status(opts?: CallOptions): Promise<StatusResult> {
    return this.call('status', {}, StatusResult, opts);
  }

  /** Ask the bridge to exit, and wait until it has (killing it if it does not within the grace). */
  async shutdown(graceMs = 10_000): Promise<void> {
    if (this.#dead) return;
    try {
      await this.call('shutdown', {}, ShutdownResult, { timeoutMs: graceMs });
      this.#transport.end();
    } catch {
      // dead already or not answering: fall through to the kill
    }
    const timer = setTimeout(() => this.kill(), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.#transport.kill(signal);
  }

  /** Resolves when the process has exited. */
  exited(): Promise<void> {
    return this.#exited;
  }

  #onLine(line: string): void {
    this.lastSeenAt = Date.now();
    this.#seenAny = true;
    if (line.trim() === '') return;
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      return this.#protocolViolation(`gpu-bridge wrote a line that is not JSON: ${JSON.stringify(line.slice(0, 200))}`);
    }
    if (msg !== null && typeof msg === 'object' && 'event' in msg) {
      const ev = BridgeEvent.safeParse(msg);
      if (!ev.success) return this.#protocolViolation(`gpu-bridge wrote a malformed event line: ${line.slice(0, 200)}`);
      this.#opts.onEvent?.(ev.data);
      return;
    }
    const r = Reply.safeParse(msg);
    if (!r.success) return this.#protocolViolation(`gpu-bridge wrote a line that is neither a reply nor an event: ${line.slice(0, 200)}`);
    const reply = r.data;
    const id = typeof reply.id === 'number' ? reply.id : NaN;
    const p = this.#pending.get(id);
    if (!p) {
      if (this.#abandoned.delete(id)) return;
      const why = reply.ok ? 'ok' : `${reply.error.code}: ${reply.error.message}`;
      return this.#protocolViolation(`gpu-bridge replied to unknown request id ${JSON.stringify(reply.id)} (${why})`);
    }
    this.#pending.delete(id);
    clearTimeout(p.timer);
    if (reply.ok) p.resolve(reply.result);
    else p.reject(new BridgeRemoteError(p.op, reply.error.code, reply.error.message, reply.error.retryable));
  }

  #protocolViolation(message: string): void {
    this.#fail(new BridgeProtocolError(message));
    this.kill();
  }

  #fail(err: BridgeError): void {
    if (this.#dead) return;
    this.#dead = err;
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.#pending.delete(id);
    }
  }
}
