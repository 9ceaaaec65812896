/**
 * Policies served by an OpenAI-compatible server. Sampling goes to the server (one client per
 * role, shared by every version, so its concurrency limit holds across them). Training goes
 * through a gpu-bridge process when `learner.bridge` is set (one bridge policy per role,
 * versions published as checkpoints and loaded into the server). Without a bridge the trainer
 * takes only frozen steps (learning rate 0, checked by the config and again here), which move
 * the version and change no weight, and its parameters name the server and model.
 */
import path from 'node:path';
import type { Problem } from '../core/problem.js';
import { BridgeClient } from '../bridge/index.js';
import { BridgeParams, BridgeTrainer, reloadServed, type ServedReload } from '../policies/bridge-trainer.js';
import type { Role } from '../core/roles.js';
import type { RunConfig } from '../config/schema.js';
import { OpenAIClient, OpenAIPolicy } from '../policies/openai/index.js';
import { PolicyInputError, VersionError } from '../policies/port.js';
import type { LearnerTrainer, PolicyBackend, PolicyFigures, SamplingPolicy } from './env.js';

interface ServedParams {
  backend: 'openai';
  baseUrl: string;
  model: string;
  version: number;
}

export class ServedBackend implements PolicyBackend {
  readonly name = 'openai';
  readonly exactBasis = null;
  readonly #clients: Record<Role, OpenAIClient>;
  readonly #problems: ReadonlyMap<string, Problem>;

  #bridge: Promise<BridgeClient> | null = null;

  constructor(
    readonly config: RunConfig,
    problems: readonly Problem[],
    /** The run's directory: default home of checkpoints and batch files. */
    readonly runDir: string,
  ) {
    const client = (role: Role) => {
      const o = config.policies[role].openai;
      if (!o) throw new PolicyInputError(`policies.${role}.openai is missing`);
      return new OpenAIClient(o);
    };
    this.#clients = { code: client('code'), test: client('test') };
    this.#problems = new Map(problems.map((p) => [p.id, p]));
  }

  /** One bridge process for both roles, started on first use, and again after one died. */
  async #client(): Promise<BridgeClient> {
    const b = this.config.learner.bridge!;
    const held = await this.#bridge?.catch(() => null);
    if (!held || !held.alive) this.#bridge = BridgeClient.start({ python: b.python, timeoutMs: 600_000 }).then((r) => r.client);
    return this.#bridge!;
  }

  async close(): Promise<void> {
    if (this.#bridge) await (await this.#bridge.catch(() => null))?.shutdown();
  }

  initialParams(role: Role): string {
    if (this.config.learner.bridge) return JSON.stringify({ backend: 'bridge', version: 0, checkpoint: null });
    const o = this.#clients[role].options;
    return JSON.stringify({ backend: 'openai', baseUrl: o.baseUrl, model: o.model, version: 0 } satisfies ServedParams);
  }

  evaluate(): PolicyFigures[] {
    throw new PolicyInputError('a served policy has no exact figures (only sampled ones)');
  }

  sampler(role: Role, params: string, version: number): SamplingPolicy {
    const policy = new OpenAIPolicy({ client: this.#clients[role], role, method: this.config.method, problems: this.#problems, suiteSize: this.config.sampling.suiteSize });
    const reload = this.#reload(role);
    if (!reload) return policy;
    // The server may hold other weights (started fresh, or a resumed run): load the named
    // version's checkpoint before its first sample, and check the server says it serves it.
    const parsed = BridgeParams.safeParse(JSON.parse(params));
    if (!parsed.success || !parsed.data.checkpoint) throw new PolicyInputError(`the ${role} policy at version ${version} has no published checkpoint to serve`);
    const cp = parsed.data.checkpoint;
    let synced: Promise<void> | null = null;
    return {
      name: policy.name,
      temperature: policy.temperature,
      async generate(req) {
        synced ??= reloadServed(reload, cp.path, cp.sha256);
        await synced;
        const gens = await policy.generate(req);
        for (const g of gens) {
          const fp = g.record?.served.fingerprint;
          if (fp !== undefined && fp !== null && fp !== `v${version}`) throw new VersionError(role, version, Number(fp.replace(/^v/, '')));
        }
        return gens;
      },
    };
  }

  /** Where and how to load a version into the role's server, when configured. */
  #reload(role: Role): ServedReload | null {
    const bridge = this.config.learner.bridge;
    if (!bridge?.reload) return null;
    const token = process.env[bridge.reload.adminTokenEnv];
    if (!token) throw new PolicyInputError(`learner.bridge.reload: environment variable ${bridge.reload.adminTokenEnv} (the server's admin token) is not set`);
    return { serverUrl: this.#clients[role].options.baseUrl.replace(/\/v1\/?$/, ''), token };
  }

  trainer(role: Role, params: string, version: number): LearnerTrainer {
    const bridge = this.config.learner.bridge;
    if (bridge) {
      const checkpoints = bridge.checkpoints ?? path.join(this.runDir, 'checkpoints');
      const reload = this.#reload(role);
      const trainer = new BridgeTrainer({ client: () => this.#client(), role, options: bridge, root: path.join(checkpoints, role), batchDir: path.join(this.runDir, 'batches', role), reload }, params);
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
        if (req.hyper.lr !== 0) throw new PolicyInputError(`batch ${req.batchId}: a served ${role} policy takes only frozen steps (lr 0), got lr ${req.hyper.lr}`);
        state.version += 1;
        return { version: state.version, metrics: { samples: req.samples.length, applied: 0 } };
      },
      snapshot: async () => ({ version: state.version, params: JSON.stringify(state) }),
    };
  }
}
