/**
 * The trainer port over a gpu-bridge process, for policies served by a model server: a step is
 * a JSONL batch file (with its sha256) handed to `train_step` by reference under the batch id,
 * so a retry after a failure can never apply it twice; every failed try is returned for the log
 * (TrainingStepFailed) and retried with the same batch id. A snapshot publishes the version as
 * a checkpoint directory (path and hash, which PolicyVersionPublished names) and, when asked,
 * loads it into the model server, so the next samples come from the weights just trained.
 */
import path from 'node:path';
import { z } from 'zod';
import type { BridgeTrainerOptions } from '../config/openai.js';
import {
  BridgeClient,
  BridgeDeadError,
  BridgeError,
  CheckpointFiles,
  localCheckpoint,
  storeCheckpoint,
  writeBatch,
  type Algorithm,
  type PolicyInfo,
} from '../bridge/index.js';
import type { BlobStore } from '../events/blobs.js';
import type { Role } from '../core/roles.js';
import { PolicyInputError, VersionError, type TrainStepRequest, type TrainStepResult } from './port.js';
import { syncWeights, type WeightSyncRecord, type WeightSyncTarget } from './weight-sync.js';
import { backoffMs } from '../core/backoff.js';

/** What a trainer's parameters are: a published checkpoint (or none yet, version 0 fresh): the
 * directory it was written to, its hash (the manifest's sha256) and, when its files went into the
 * blob store, each file's sha256 and size (absent in runs made before: those read the path). */
export const BridgeParams = z.strictObject({
  backend: z.literal('bridge'),
  version: z.number().int().nonnegative(),
  checkpoint: z.strictObject({ path: z.string(), sha256: z.string(), files: CheckpointFiles.optional() }).nullable(),
});
export type BridgeParams = z.infer<typeof BridgeParams>;

export interface BridgeTrainerInit {
  /** The bridge to use; after one died, a new one. */
  client: () => Promise<BridgeClient>;
  role: Role;
  options: BridgeTrainerOptions;
  /** Checkpoint root of this role's versions. */
  root: string;
  /** Where batch files are written. */
  batchDir: string;
  /** Where each published version is synced (weight sync), or null. */
  reload: WeightSyncTarget | null;
  /** The log's blob store: each published checkpoint's files go there, and a checkpoint whose
   * directory is missing here is read back from it. Null: checkpoints stay on this disk only. */
  blobs?: BlobStore | null;
  /** Where checkpoints read from the blob store are put (default: `<root>/.from-blobs`). */
  cacheDir?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class BridgeTrainer {
  readonly name: string;
  #params: BridgeParams;
  /** The bridge process this trainer's policy was loaded into: a new one (after one died) holds
   * none of it, whichever role's step found the old one dead. */
  #loadedInto: BridgeClient | null = null;
  /** The sync of the current checkpoint, once done (returned with every snapshot of it). */
  #synced: { sha256: string; record: WeightSyncRecord } | null = null;

  constructor(
    readonly init: BridgeTrainerInit,
    params: string,
  ) {
    const parsed = BridgeParams.safeParse(JSON.parse(params));
    if (!parsed.success) throw new PolicyInputError(`${init.role} trainer parameters are not a bridge checkpoint reference: ${parsed.error.message}`);
    this.#params = parsed.data;
    this.name = `bridge:${init.role}`;
  }

  get version(): number {
    return this.#params.version;
  }

  /** A directory on this disk holding the checkpoint: where it was published, or a copy from the blob store. */
  #localPath(cp: NonNullable<BridgeParams['checkpoint']>): Promise<string> {
    return localCheckpoint(
      cp,
      this.init.blobs ?? null,
      this.init.cacheDir ?? path.join(this.init.root, '.from-blobs'),
      `${this.init.role} version ${this.#params.version}`,
    );
  }

  /** Puts the policy in the bridge at this trainer's version: from its checkpoint, or fresh. */
  async #ensureLoaded(client: BridgeClient): Promise<void> {
    if (this.#loadedInto === client) return;
    const o = this.init.options;
    const status = await client.status();
    const held = status.policies[this.init.role] as PolicyInfo | undefined;
    if (!held || held.version !== this.#params.version) {
      // Past version 0 only a published checkpoint holds the weights of this version.
      if (this.#params.version > 0 && !this.#params.checkpoint)
        throw new PolicyInputError(`the ${this.init.role} policy at version ${this.#params.version} has no published checkpoint to load into the bridge`);
      // A restarted trainer on another machine (or one whose disk lost the run directory)
      // finds the checkpoint in the blob store by hash.
      const cp = this.#params.checkpoint;
      const model = cp ? await this.#localPath(cp) : o.model;
      await client.loadPolicy(
        {
          policy: this.init.role,
          backend: o.backend,
          ...(model ? { model } : {}),
          ...(o.config ? { config: o.config } : {}),
          seed: o.seed,
          version: this.#params.version,
          device: o.device,
        },
        { timeoutMs: 600_000 },
      );
    }
    this.#loadedInto = client;
  }

  async trainStep(req: TrainStepRequest): Promise<TrainStepResult> {
    if (req.role !== this.init.role) throw new PolicyInputError(`this is the ${this.init.role} trainer; batch ${req.batchId} is for ${req.role}`);
    if (req.expectedVersion !== this.#params.version) throw new VersionError(this.init.role, req.expectedVersion, this.#params.version);
    let client = await this.init.client();
    await this.#ensureLoaded(client);
    const rows = batchRows(req);
    const batch = await writeBatch(path.join(this.init.batchDir, `${req.batchId.replace(/[^\w.-]+/g, '_')}.jsonl`), req.algorithm, rows.rows);
    const { attempts, baseDelayMs, maxDelayMs } = this.init.options.retry;
    const failures: { error: string; retryable: boolean }[] = [];
    for (let attempt = 1; ; attempt++) {
      try {
        const r = await client.trainStep(
          {
            policy: this.init.role,
            batch_id: req.batchId,
            expected_version: req.expectedVersion,
            algorithm: req.algorithm,
            batch,
            ...(this.init.options.microBatchSize ? { micro_batch_size: this.init.options.microBatchSize } : {}),
            hyper: { lr: req.hyper.lr ?? 0 },
          },
          { timeoutMs: 600_000 },
        );
        this.#params = { backend: 'bridge', version: r.version, checkpoint: null };
        const metrics: Record<string, number> = {
          rows: rows.rows.length,
          oldLogprobRows: rows.oldLogprobRows,
          placeholder: rows.placeholder ? 1 : 0,
          duplicate: r.duplicate ? 1 : 0,
        };
        for (const [k, v] of Object.entries(r)) if (typeof v === 'number' && Number.isFinite(v)) metrics[k] = v;
        return { version: r.version, metrics, failures };
      } catch (e) {
        if (!(e instanceof BridgeError)) throw e;
        const retrying = e.retryable && attempt < attempts;
        failures.push({ error: e.message, retryable: e.retryable });
        if (!retrying) throw e;
        await sleep(backoffMs(baseDelayMs, maxDelayMs, attempt));
        if (e instanceof BridgeDeadError) {
          // A new bridge (the client factory starts one) holds nothing: load this version's
          // checkpoint again, then the same batch id applies the step exactly once.
          client = await this.init.client();
          await this.#ensureLoaded(client);
        }
      }
    }
  }

  /** Publishes the current version (idempotent; its files into the blob store) without loading
   * it into any server: a checkpoint to resume from, not a version to sample. */
  async checkpoint(): Promise<{ version: number; params: string }> {
    const client = await this.init.client();
    await this.#ensureLoaded(client);
    if (!this.#params.checkpoint) {
      const p = await client.publish(
        { policy: this.init.role, root: this.init.root, version: this.#params.version },
        { idem: `${this.init.root}/${this.#params.version}`, timeoutMs: 600_000 },
      );
      const files = this.init.blobs ? await storeCheckpoint(p.path, p.sha256, this.init.blobs, `${this.init.role} version ${p.version}`) : undefined;
      this.#params = { backend: 'bridge', version: p.version, checkpoint: { path: p.path, sha256: p.sha256, ...(files ? { files } : {}) } };
    }
    return { version: this.#params.version, params: JSON.stringify(this.#params) };
  }

  /** Publishes the current version (idempotent) and loads it into the server when asked; the
   * sync's request and answer come back with every snapshot of that version, for the log. */
  async snapshot(): Promise<{ version: number; params: string; synced?: WeightSyncRecord }> {
    await this.checkpoint();
    const cp = this.#params.checkpoint!;
    if (this.init.reload && this.#synced?.sha256 !== cp.sha256) {
      // A checkpoint published elsewhere is synced from this disk's copy.
      const at = await this.#localPath(cp);
      this.#synced = { sha256: cp.sha256, record: await syncWeights(this.init.reload, { path: at, sha256: cp.sha256 }, this.#params.version) };
    }
    return {
      version: this.#params.version,
      params: JSON.stringify(this.#params),
      ...(this.#synced?.sha256 === cp.sha256 ? { synced: this.#synced.record } : {}),
    };
  }
}

/** The batch's rows for the bridge. Rows with an empty answer cannot be trained on (no token);
 * a GRPO batch left with none gets one zero-advantage row, a step that moves the version and
 * no weight, reported as `placeholder`. */
export function batchRows(req: TrainStepRequest): { rows: unknown[]; placeholder: boolean; oldLogprobRows: number } {
  const usable = req.samples.filter((s) => s.response.length > 0 && s.prompt.length > 0);
  const algorithm: Algorithm = req.algorithm;
  const rows = usable.map((s) => {
    const text = { prompt: s.prompt, completion: s.response, eos: true };
    // GRPO trains the tokens as sampled against their sampling log-probs (the PPO ratio's old
    // side): off-policy samples (learner.maxStaleness > 0) are then weighted and clipped.
    if (algorithm === 'grpo' && s.sampled)
      return { prompt: s.prompt, completion_ids: s.sampled.tokenIds, old_logprobs: s.sampled.logprobs, advantage: s.advantage };
    if (algorithm === 'grpo') return { ...text, advantage: s.advantage };
    if (algorithm === 'kto') return { ...text, label: s.advantage > 0 };
    return text;
  });
  const oldLogprobRows = rows.filter((r) => 'old_logprobs' in r).length;
  if (rows.length > 0) return { rows, placeholder: false, oldLogprobRows };
  if (algorithm !== 'grpo') throw new PolicyInputError(`batch ${req.batchId}: no sample with text to train on (${algorithm} needs at least one)`);
  return { rows: [{ prompt: ' ', completion: ' ', eos: true, advantage: 0 }], placeholder: true, oldLogprobRows: 0 };
}
