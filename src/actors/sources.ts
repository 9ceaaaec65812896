/**
 * Where a run's problems and policies come from. The embedded default is the bundled demo set
 * with the offline catalog policy; its candidate programs (including AST mutants, which need
 * python) are built once and cached in the run's blob store.
 */
import { createHash } from 'node:crypto';
import type { RunConfig } from '../config/schema.js';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Problem } from '../core/problem.js';
import { loadDemo } from '../datasets/demo/index.js';
import { buildCatalogUniverse, type CatalogUniverse } from '../datasets/demo/catalog/index.js';
import { CatalogPolicy, exactFigures } from '../policies/catalog/index.js';
import type { Sandbox } from '../sandbox/api.js';
import type { LearnerTrainer, PolicyBackend, PolicyFigures, SamplingPolicy } from './env.js';
import type { Role } from '../core/roles.js';
import { canonicalJson } from '../core/canonical-json.js';

export class UnsupportedSourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedSourceError';
  }
}

// 3: mutants chosen by examples and probes through the sandbox, never by held-out tests.
// 4: the reference's verdict on every candidate test (validTests).
const CATALOG_VERSION = 4;

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

  initialParams(role: Role): string {
    return JSON.stringify(new CatalogPolicy(role, this.universe, this.#options()).toJSON());
  }

  evaluate(params: Record<Role, string>, problemIds: readonly string[], whiteBox: boolean): PolicyFigures[] {
    const code = CatalogPolicy.fromJSON(JSON.parse(params.code), this.universe, this.#options());
    const test = CatalogPolicy.fromJSON(JSON.parse(params.test), this.universe, this.#options());
    return problemIds.map((problemId) => ({ problemId, ...exactFigures(this.universe, code, test, problemId, whiteBox) }));
  }

  sampler(role: Role, params: string, _version: number): SamplingPolicy {
    const policy = CatalogPolicy.fromJSON(JSON.parse(params), this.universe, this.#options());
    // A softmax over logits: no temperature is applied, so none is recorded.
    return { name: `catalog-${role}`, temperature: null, generate: (r) => policy.generate(r) };
  }

  trainer(role: Role, params: string, _version: number): LearnerTrainer {
    const policy = CatalogPolicy.fromJSON(JSON.parse(params), this.universe, this.#options());
    return {
      name: `catalog-${role}`,
      trainStep: (r) => policy.trainStep(r),
      snapshot: async () => ({ version: policy.version, params: JSON.stringify(policy.toJSON()) }),
    };
  }
}

export interface PreparedRun {
  problems: Problem[];
  backend: PolicyBackend;
}

/** `cacheDir`: where built catalogs are kept between runs (they depend only on the problems,
 * the seed and the catalog options). */
export async function prepareRun(config: RunConfig, cacheDir: string | null, sandbox: Sandbox): Promise<PreparedRun> {
  if (config.dataset.format !== 'demo') {
    throw new UnsupportedSourceError(
      `dataset.format "${config.dataset.format}": the catalog policy runs on the bundled demo set only; other datasets need a model policy backend`,
    );
  }
  let demo = loadDemo();
  if (config.dataset.limit !== undefined) demo = demo.slice(0, config.dataset.limit);
  const options = { programs: { seed: config.seed, maxMutants: config.policies.code.mutants }, tests: { seed: config.seed, count: config.policies.test.candidates } };
  const cacheKey = createHash('sha256')
    .update(canonicalJson({ v: CATALOG_VERSION, options, problems: demo.map((d) => d.problem) }))
    .digest('hex');
  const cacheFile = cacheDir ? path.join(cacheDir, `catalog-${cacheKey.slice(0, 24)}.json`) : null;
  let universe: CatalogUniverse | undefined;
  if (cacheFile && existsSync(cacheFile)) universe = JSON.parse(readFileSync(cacheFile, 'utf8')) as CatalogUniverse;
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
  return { problems, backend: new CatalogBackend(universe, config) };
}
