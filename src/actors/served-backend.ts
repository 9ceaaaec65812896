/**
 * Policies served by an OpenAI-compatible server. Sampling goes to the server (one client per
 * role, shared by every version, so its concurrency limit holds across them). Training goes
 * through a gpu-bridge process when `learner.bridge` is set (one bridge policy per role,
 * versions published as checkpoints and loaded into the server). Without a bridge the trainer
 * takes only frozen steps (learning rate 0, checked by the config and again here), which move
 * the version and change no weight, and its parameters name the server and model.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Problem } from '../core/problem.js';
import {
  BridgeClient,
  CheckpointCache,
  localCheckpoint,
  startServe,
  storeCheckpoint,
  threadEnv,
  trainerCodeVersion,
  type BridgeEvent,
  type HelloResult,
  type ServeProcess,
} from '../bridge/index.js';
import type { BlobStore } from '../events/blobs.js';
import { BridgeParams, BridgeTrainer } from '../policies/bridge-trainer.js';
import type { Role } from '../core/roles.js';
import type { RunConfig } from '../config/schema.js';
import { OpenAIClient, OpenAIPolicy } from '../policies/openai/index.js';
import { PolicyInputError, VersionError } from '../policies/port.js';
import { servedModelFor, syncWeights, type WeightSyncTarget } from '../policies/weight-sync.js';
import type { LearnerTrainer, PolicyBackend, PolicyFigures, SamplingPolicy, WarmStartCache } from './env.js';

const ROLES = ['code', 'test'] as const satisfies readonly Role[];

interface ServedParams {
  backend: 'openai';
  baseUrl: string;
  model: string;
  version: number;
}

export class ServedBackend implements PolicyBackend {
  readonly name = 'openai';
  readonly exactBasis = null;
  #clients: Record<Role, OpenAIClient> | null = null;
  readonly #problems: ReadonlyMap<string, Problem>;
  /** learner.bridge.serve: the servers this run started, and their admin token. */
  #servers: ServeProcess[] = [];
  #serveToken: string | null = null;

  #bridge: Promise<BridgeClient> | null = null;
  /** What the trainer bridge said when it started (its torch and device: part of a warm start's key). */
  #hello: HelloResult | null = null;
  #warmStartCache: WarmStartCache | undefined;

  constructor(
    readonly config: RunConfig,
    problems: readonly Problem[],
    /** The run's directory: default home of checkpoints and batch files. */
    readonly runDir: string,
    /** For crash tests: sees every event of the trainer bridge (progress of a step) with its client. */
    readonly onBridgeEvent?: (e: BridgeEvent, client: BridgeClient) => void,
    /** The log's blob store: published checkpoints go there, and a process whose disk lacks a
     * version's directory reads it from there by hash (into `<runDir>/checkpoint-cache`). */
    readonly blobs: BlobStore | null = null,
  ) {
    this.#problems = new Map(problems.map((p) => [p.id, p]));
    if (!config.learner.bridge?.serve) this.#clients = this.#makeClients((role) => this.#section(role).baseUrl!);
  }

  #section(role: Role) {
    const o = this.config.policies[role].openai;
    if (!o) throw new PolicyInputError(`policies.${role}.openai is missing`);
    return o;
  }

  #makeClients(baseUrl: (role: Role) => string): Record<Role, OpenAIClient> {
    const client = (role: Role) => new OpenAIClient({ ...this.#section(role), baseUrl: baseUrl(role) });
    return { code: client('code'), test: client('test') };
  }

  get #ready(): Record<Role, OpenAIClient> {
    if (!this.#clients) throw new PolicyInputError('learner.bridge.serve: the servers are not started (call start() first)');
    return this.#clients;
  }

  /** learner.bridge.serve: starts one gpu-bridge serve per role (a no-op otherwise). */
  async start(): Promise<void> {
    const b = this.config.learner.bridge;
    if (!b?.serve || this.#clients) return;
    const token = randomBytes(24).toString('base64url');
    const started = await Promise.allSettled(
      ROLES.map((role) =>
        startServe({
          backend: b.backend,
          ...(b.model ? { model: b.model } : {}),
          ...(b.config ? { config: b.config } : {}),
          seed: b.seed,
          device: b.device === 'auto' ? 'cpu' : b.device,
          servedModelName: this.#section(role).model,
          adminToken: token,
          python: b.python,
          threads: b.serve!.threads,
        }),
      ),
    );
    this.#servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) {
      await this.close();
      throw failed.reason;
    }
    this.#serveToken = token;
    const urls = Object.fromEntries(ROLES.map((role, i) => [role, this.#servers[i]!.baseUrl])) as Record<Role, string>;
    this.#clients = this.#makeClients((role) => urls[role]);
  }

  /** One bridge process for both roles, started on first use, and again after one died. */
  async #client(): Promise<BridgeClient> {
    const b = this.config.learner.bridge!;
    const held = await this.#bridge?.catch(() => null);
    if (!held || !held.alive) {
      const observe = this.onBridgeEvent;
      let client: BridgeClient | null = null;
      this.#bridge = BridgeClient.start({
        python: b.python,
        timeoutMs: 600_000,
        ...(b.threads ? { env: threadEnv(b.threads) } : {}),
        ...(observe ? { onEvent: (e: BridgeEvent) => client && observe(e, client) } : {}),
      }).then((r) => {
        this.#hello = r.hello;
        return (client = r.client);
      });
    }
    return this.#bridge!;
  }

  /** The bridge process the Learner trains through, if one is running (tests kill it). */
  async bridgeClient(): Promise<BridgeClient | null> {
    return (await this.#bridge?.catch(() => null)) ?? null;
  }

  async close(): Promise<void> {
    if (this.#bridge) await (await this.#bridge.catch(() => null))?.shutdown();
    await Promise.all(this.#servers.map((s) => s.close()));
    this.#servers = [];
  }

  initialParams(role: Role): string {
    if (this.config.learner.bridge) return JSON.stringify({ backend: 'bridge', version: 0, checkpoint: null });
    const o = this.#ready[role].options;
    return JSON.stringify({ backend: 'openai', baseUrl: o.baseUrl, model: o.model, version: 0 } satisfies ServedParams);
  }

  evaluate(): PolicyFigures[] {
    throw new PolicyInputError('a served policy has no exact figures (only sampled ones)');
  }

  sampler(role: Role, params: string, version: number): SamplingPolicy {
    const sync = this.#syncTarget(role);
    const base = { client: this.#ready[role], role, method: this.config.method, problems: this.#problems, suiteSize: this.config.sampling.suiteSize };
    if (!sync) return new OpenAIPolicy(base);
    const policy = new OpenAIPolicy({ ...base, model: servedModelFor(sync, version) });
    // The server may hold other weights (started fresh, or a resumed run): load the named
    // version's checkpoint before its first sample, and check the server says it serves it.
    const parsed = BridgeParams.safeParse(JSON.parse(params));
    if (!parsed.success || !parsed.data.checkpoint) throw new PolicyInputError(`the ${role} policy at version ${version} has no published checkpoint to serve`);
    const cp = parsed.data.checkpoint;
    // The server runs beside this sampler: when the trainer's directory is not on this disk,
    // the checkpoint is put together here from the blob store and the server loads that copy.
    const local = async () => ({ path: await localCheckpoint(cp, this.blobs, this.#cacheDir, `${role} version ${version}`), sha256: cp.sha256 });
    let synced: Promise<unknown> | null = null;
    return {
      name: policy.name,
      temperature: policy.temperature,
      async generate(req) {
        synced ??= local().then((at) => syncWeights(sync, at, version));
        await synced;
        const gens = await policy.generate(req);
        // gpu-bridge serve names the version it serves in system_fingerprint ("v3").
        if (sync.kind === 'bridge') {
          for (const g of gens) {
            const fp = g.record?.served.fingerprint;
            if (fp !== undefined && fp !== null && fp !== `v${version}`) throw new VersionError(role, version, Number(fp.replace(/^v/, '')));
          }
        }
        return gens;
      },
    };
  }

  /** Warm starts (learner.sft) kept for every run of the folder that holds this run's directory,
   * in its `.cache/warm-start`: an entry is the checkpoint of a role's last SFT step, keyed by
   * what determines it (see warm-start.ts), the trainer's part of which is said here. */
  get warmStartCache(): WarmStartCache | undefined {
    const bridge = this.config.learner.bridge;
    if (!bridge) return undefined;
    if (this.#warmStartCache) return this.#warmStartCache;
    const cache = new CheckpointCache(path.join(path.dirname(path.resolve(this.runDir)), '.cache', 'warm-start'));
    const label = (role: Role, key: string) => `${role} warm start ${key.slice(0, 12)}`;
    this.#warmStartCache = {
      identity: async () => {
        await this.#client();
        const h = this.#hello!;
        const { backend, model, config, seed, device, microBatchSize, threads } = bridge;
        return {
          trainer: 'gpu-bridge',
          code: trainerCodeVersion(),
          bridge: h.bridge,
          torch: h.torch,
          device: { type: h.device.type, name: h.device.name },
          blas: h.blas,
          options: { backend, model: model ?? null, config: config ?? null, seed, device, microBatchSize: microBatchSize ?? null, threads: threads ?? null },
        };
      },
      get: async (key, role) => {
        const hit = cache.get(key);
        if (!hit) return null;
        // Into this run's blob store: the run stays whole without the cache.
        const files = this.blobs ? await storeCheckpoint(hit.path, hit.sha256, this.blobs, label(role, key)) : undefined;
        const params: BridgeParams = {
          backend: 'bridge',
          version: hit.version,
          checkpoint: { path: hit.path, sha256: hit.sha256, ...(files ? { files } : {}) },
        };
        return { version: hit.version, params: JSON.stringify(params) };
      },
      put: async (key, role, params, about) => {
        const cp = BridgeParams.parse(JSON.parse(params)).checkpoint;
        if (!cp) throw new PolicyInputError(`the ${role} warm start's parameters name no checkpoint to keep`);
        cache.put(key, await localCheckpoint(cp, this.blobs, this.#cacheDir, label(role, key)), cp.sha256, about);
      },
    };
    return this.#warmStartCache;
  }

  /** Checkpoints read from the blob store (absolute: servers run in another directory). */
  get #cacheDir(): string {
    return path.resolve(this.runDir, 'checkpoint-cache');
  }

  /** Where and how to load a version into the role's server, when configured. */
  #syncTarget(role: Role): WeightSyncTarget | null {
    const bridge = this.config.learner.bridge;
    if (!bridge) return null;
    const client = this.#ready[role].options;
    const serverUrl = client.baseUrl.replace(/\/v1\/?$/, '');
    const target = { serverUrl, baseModel: client.model, prefix: client.model };
    if (bridge.serve) return { ...target, kind: 'bridge', token: this.#serveToken };
    const envToken = (name: string | undefined, key: string, required: boolean): string | null => {
      if (name === undefined) return null;
      const token = process.env[name];
      if (!token && required) throw new PolicyInputError(`${key}: environment variable ${name} is not set`);
      return token || null;
    };
    if (bridge.reload) return { ...target, kind: 'bridge', token: envToken(bridge.reload.adminTokenEnv, 'learner.bridge.reload.adminTokenEnv', true) };
    const ws = bridge.weightSync;
    if (!ws) return null;
    if (ws.kind === 'bridge') return { ...target, kind: 'bridge', token: envToken(ws.adminTokenEnv, 'learner.bridge.weightSync.adminTokenEnv', true) };
    return {
      ...target,
      kind: ws.kind,
      prefix: (ws.kind === 'vllm-lora' ? ws.prefix : undefined) ?? client.model,
      token: envToken(ws.apiKeyEnv, 'learner.bridge.weightSync.apiKeyEnv', true),
    };
  }

  trainer(role: Role, params: string, version: number): LearnerTrainer {
    const bridge = this.config.learner.bridge;
    if (bridge) {
      // Absolute: the checkpoint path goes to servers that run in another directory (a
      // relative run directory such as `runs/<id>` would name nothing there).
      const checkpoints = path.resolve(bridge.checkpoints ?? path.join(this.runDir, 'checkpoints'));
      const reload = this.#syncTarget(role);
      const trainer = new BridgeTrainer(
        {
          client: () => this.#client(),
          role,
          options: bridge,
          root: path.join(checkpoints, role),
          batchDir: path.resolve(this.runDir, 'batches', role),
          reload,
          blobs: this.blobs,
          cacheDir: this.#cacheDir,
        },
        params,
      );
      if (trainer.version !== version) throw new PolicyInputError(`${role} checkpoint holds version ${trainer.version}, asked for ${version}`);
      return trainer;
    }
    const state = JSON.parse(params) as ServedParams;
    state.version = version;
    const name = `openai:${state.model}`;
    return {
      name,
      async trainStep(req) {
        if (req.expectedVersion !== state.version) throw new VersionError(role, req.expectedVersion, state.version);
        if (req.hyper.lr !== 0)
          throw new PolicyInputError(`batch ${req.batchId}: a served ${role} policy takes only frozen steps (lr 0), got lr ${req.hyper.lr}`);
        state.version += 1;
        return { version: state.version, metrics: { samples: req.samples.length, applied: 0 } };
      },
      snapshot: async () => ({ version: state.version, params: JSON.stringify(state) }),
    };
  }
}
