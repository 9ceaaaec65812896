/**
 * Where a run's problems and policies come from. The embedded default is the bundled demo set
 * with the offline catalog policy; its candidate programs (including AST mutants, which need
 * python) are built once (and kept in a local cache between runs), then stored in the run's blob
 * store and named in RunStarted: a process joining the run reads that one by hash.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { BlobStore } from '../events/log.js';
import type { RunConfig } from '../config/schema.js';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TestCase, type Problem } from '../core/problem.js';
import { ProgramCandidate } from '../datasets/demo/catalog/programs.js';
import { loadDemo, type DemoProblem } from '../datasets/demo/index.js';
import { readProblemFile } from '../datasets/problemFile.js';
import { buildCatalogUniverse, type CatalogUniverse } from '../datasets/demo/catalog/index.js';
import { CatalogPolicy, SharedCatalogPolicy, exactFigures, type CatalogState } from '../policies/catalog/index.js';
import type { Sandbox } from '../sandbox/api.js';
import type { LearnerTrainer, PolicyBackend, PolicyFigures, SamplingPolicy } from './env.js';
import type { Role } from '../core/roles.js';
import { canonicalJson } from '../core/canonical-json.js';
import { ServedBackend } from './served-backend.js';
import { UnsupportedSourceError } from './errors.js';

export { UnsupportedSourceError };

// 3: mutants chosen by examples and probes through the sandbox, never by held-out tests.
// 5: candidate tests state an expected value (a candidate program's output), and the reference's
// verdict on every candidate test as stated (validTests).
const CATALOG_VERSION = 5;

class CatalogBackend implements PolicyBackend {
  readonly name = 'catalog';
  readonly exactBasis = 'catalog' as const;
  constructor(
    readonly universe: CatalogUniverse,
    readonly config: RunConfig,
  ) {}

  #options() {
    return { suiteSize: this.config.sampling.suiteSize, keepVersions: 2 };
  }

  get #shared(): boolean {
    return this.config.policies.shared;
  }

  /** One name for the shared policy (both roles publish under it), one per role otherwise. */
  #name(role: Role): string {
    return this.#shared ? 'catalog-shared' : `catalog-${role}`;
  }

  /** States this backend's trainers just snapshotted, by role and params text (a few): the
   * sampler of a version published a moment ago uses the state as it was serialized instead of
   * parsing and validating the whole policy again, the largest cost of a round's bookkeeping. */
  readonly #snapshotted = new Map<string, CatalogState>();

  #policy(role: Role, params: string): CatalogPolicy | SharedCatalogPolicy {
    const known = this.#shared ? undefined : this.#snapshotted.get(`${role}\0${params}`);
    if (known) return new CatalogPolicy(role, this.universe, this.#options(), known);
    return this.#shared
      ? SharedCatalogPolicy.fromJSON(JSON.parse(params), this.universe, this.#options())
      : CatalogPolicy.fromJSON(JSON.parse(params), this.universe, this.#options());
  }

  initialParams(role: Role): string {
    if (this.#shared) return JSON.stringify(new SharedCatalogPolicy(this.universe, this.#options()).toJSON());
    return JSON.stringify(new CatalogPolicy(role, this.universe, this.#options()).toJSON());
  }

  evaluate(params: Record<Role, string>, problemIds: readonly string[], whiteBox: boolean): PolicyFigures[] {
    const of = (role: Role) => {
      const p = this.#policy(role, params[role]);
      return p instanceof SharedCatalogPolicy ? p.role(role) : p;
    };
    const code = of('code');
    const test = of('test');
    return problemIds.map((problemId) => ({ problemId, ...exactFigures(this.universe, code, test, problemId, whiteBox) }));
  }

  sampler(role: Role, params: string, _version: number): SamplingPolicy {
    const policy = this.#policy(role, params);
    // A softmax over logits: no temperature is applied, so none is recorded.
    return { name: this.#name(role), temperature: null, generate: (r) => policy.generate(r) };
  }

  trainer(role: Role, params: string, _version: number): LearnerTrainer {
    const policy = this.#policy(role, params);
    return {
      name: this.#name(role),
      trainStep: (r) => policy.trainStep(r),
      snapshot: async () => {
        const state = policy.toJSON();
        const params = JSON.stringify(state);
        if (policy instanceof CatalogPolicy) {
          if (this.#snapshotted.size >= 4) this.#snapshotted.delete(this.#snapshotted.keys().next().value!);
          this.#snapshotted.set(`${role}\0${params}`, state as CatalogState);
        }
        return { version: policy.version, params };
      },
    };
  }
}

export interface PreparedRun {
  problems: Problem[];
  backend: PolicyBackend;
  /** The catalog's blob when the backend is the catalog and a blob store was given, else null. */
  catalogHash: string | null;
}

/** Where a run records its catalog: the blob store, and the blob RunStarted names (null: none
 * recorded yet; the catalog is built or read from the local cache, then stored). */
export interface CatalogRecord {
  blobs: BlobStore;
  hash: string | null;
}

/** The shape checked when a recorded catalog is read back (it crossed a process boundary). */
const RecordedUniverse = z.strictObject({
  programs: z.record(z.string(), z.array(ProgramCandidate)),
  tests: z.record(z.string(), z.array(z.strictObject({ testId: z.string().min(1), test: TestCase, origin: z.string() }))),
  validTests: z.record(z.string(), z.array(z.string())),
});

async function recordedUniverse(record: CatalogRecord & { hash: string }, problemIds: readonly string[]): Promise<CatalogUniverse> {
  const where = `the catalog recorded in RunStarted (blob ${record.hash.slice(0, 12)})`;
  let raw: unknown;
  try {
    raw = JSON.parse(await record.blobs.getText(record.hash));
  } catch (err) {
    throw new UnsupportedSourceError(`${where} cannot be read: ${(err as Error).message}`);
  }
  const parsed = RecordedUniverse.safeParse(raw);
  if (!parsed.success)
    throw new UnsupportedSourceError(
      `${where} is not a catalog (${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || 'catalog'}: ${i.message}`)
        .join('; ')})`,
    );
  const missing = problemIds.filter((id) => !parsed.data.programs[id] || !parsed.data.tests[id] || !parsed.data.validTests[id]);
  if (missing.length > 0) throw new UnsupportedSourceError(`${where} has no candidates for problem ${missing.join(', ')}`);
  return parsed.data;
}

/** The demo problems a problem file keeps (an evolved dataset, `crucible evolved`), each with
 * the file's generated tests: a following run trains on the evolved tests. */
async function withEvolvedTests(demo: DemoProblem[], file: string): Promise<DemoProblem[]> {
  const { problems } = await readProblemFile(file);
  const byId = new Map(problems.map((p) => [p.id, p]));
  const kept = demo.filter((d) => byId.has(d.problem.id));
  if (kept.length === 0) throw new UnsupportedSourceError(`${file}: none of its problems is a bundled demo problem; the catalog policy runs on those only`);
  return kept.map((d) => ({ ...d, problem: { ...d.problem, tests: { ...d.problem.tests, generated: byId.get(d.problem.id)!.tests.generated } } }));
}

/** `cacheDir`: where built catalogs are kept between runs (they depend only on the problems,
 * the seed and the catalog options). */
/** `runDir`: where a served backend keeps its checkpoints and batch files. */
/** `record`: the run's blob store and the catalog RunStarted names, if any (then it is used as
 * recorded, not built). `onBridgeEvent`: told when a served policy's own bridge starts or stops. */
export async function prepareRun(
  config: RunConfig,
  cacheDir: string | null,
  sandbox: Sandbox,
  runDir = config.dir,
  record?: CatalogRecord,
  onBridgeEvent?: ServedBackend['onBridgeEvent'],
): Promise<PreparedRun> {
  if (config.dataset.format !== 'demo') {
    throw new UnsupportedSourceError(
      `dataset.format "${config.dataset.format}": the catalog policy runs on the bundled demo set only; other datasets need a model policy backend`,
    );
  }
  let demo = loadDemo();
  if (config.dataset.path !== undefined) demo = await withEvolvedTests(demo, config.dataset.path);
  if (config.dataset.ids !== undefined) {
    const known = new Set(demo.map((d) => d.problem.id));
    const unknown = config.dataset.ids.filter((id) => !known.has(id));
    if (unknown.length)
      throw new UnsupportedSourceError(`dataset.ids: ${unknown.join(', ')} not in the dataset (ids look like ${demo[0]?.problem.id ?? 'demo/...'})`);
    const wanted = new Set(config.dataset.ids);
    demo = demo.filter((d) => wanted.has(d.problem.id));
  }
  if (config.dataset.limit !== undefined) demo = demo.slice(0, config.dataset.limit);
  const options = {
    programs: { seed: config.seed, maxMutants: config.policies.code.mutants },
    tests: { seed: config.seed, count: config.policies.test.candidates },
  };
  const cacheKey = createHash('sha256')
    .update(canonicalJson({ v: CATALOG_VERSION, options, problems: demo.map((d) => d.problem) }))
    .digest('hex');
  const cacheFile = cacheDir ? path.join(cacheDir, `catalog-${cacheKey.slice(0, 24)}.json`) : null;
  let universe: CatalogUniverse | undefined;
  if (record?.hash)
    universe = await recordedUniverse(
      { ...record, hash: record.hash },
      demo.map((d) => d.problem.id),
    );
  else if (cacheFile && existsSync(cacheFile)) universe = JSON.parse(readFileSync(cacheFile, 'utf8')) as CatalogUniverse;
  if (!universe) {
    universe = await buildCatalogUniverse(demo, sandbox, options);
    if (cacheFile) {
      mkdirSync(path.dirname(cacheFile), { recursive: true });
      // Written whole then renamed: a reader never sees half a cache.
      writeFileSync(`${cacheFile}.tmp`, JSON.stringify(universe));
      renameSync(`${cacheFile}.tmp`, cacheFile);
    }
  }
  // Known-incorrect programs (kill-rate targets): the hand-written bugs and the mutants.
  const problems = demo.map(({ problem }) => ({
    ...problem,
    incorrectSolutions: universe.programs[problem.id]!.filter((c) => !c.correct).map((c) => c.program),
  }));
  if (config.policies.code.backend === 'openai') {
    const served = new ServedBackend(config, problems, runDir, onBridgeEvent, record?.blobs ?? null);
    await served.start();
    return { problems, backend: served, catalogHash: null };
  }
  // Canonical JSON: the same catalog is the same blob in every process.
  const catalogHash = record ? (record.hash ?? (await record.blobs.put(canonicalJson(universe)))) : null;
  return { problems, backend: new CatalogBackend(universe, config), catalogHash };
}
