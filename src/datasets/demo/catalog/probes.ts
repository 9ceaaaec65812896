/**
 * Probe tests: random inputs inside a problem's constraints with the reference's outputs as
 * expected values, run through the sandbox. The catalog keeps a mutant only if the examples or
 * the probes tell it apart from the reference; probes never equal a held-out input.
 */
import type { TestCase } from '../../../core/problem.js';
import { withExpectedOutput } from '../../../core/problem.js';
import { Rng } from '../../../core/rng.js';
import type { RunRequest, Sandbox } from '../../../sandbox/api.js';
import { printStdio, valuesToArgs } from '../input-spec.js';
import { randomValues } from '../random-input.js';
import type { CatalogSource } from './source.js';
import { testKey } from './test-key.js';

export function runRequest(source: CatalogSource, program: string, tests: readonly TestCase[], stopOnFirstFailure = false): RunRequest {
  const p = source.problem;
  return { program, tests, entryPoint: p.entryPoint, limits: p.limits, comparison: p.comparison, stopOnFirstFailure };
}

export function inputTest(source: CatalogSource, values: Parameters<typeof printStdio>[1]): TestCase {
  const spec = source.extras.inputSpec;
  return source.problem.style === 'stdio'
    ? { style: 'stdio', input: printStdio(spec, values), output: null }
    : { style: 'call', args: valuesToArgs(spec, values) };
}

/** Up to `count` probes; drawn from a stream seeded by (seed, problem). */
export async function buildProbes(source: CatalogSource, sandbox: Sandbox, count: number, seed: number): Promise<TestCase[]> {
  const reference = source.problem.solutions[0];
  if (reference === undefined) throw new Error(`${source.problem.id}: no reference solution`);
  const rng = Rng.derive(seed, source.problem.id, 'probes');
  const seen = new Set([...source.avoid, ...source.examples.map(testKey)]);
  const inputs: TestCase[] = [];
  for (let tries = 0; inputs.length < count && tries < count * 20; tries++) {
    const t = inputTest(source, randomValues(source.extras.inputSpec, rng));
    const k = testKey(t);
    if (seen.has(k)) continue;
    seen.add(k);
    inputs.push(t);
  }
  const results = await sandbox.run({ ...runRequest(source, reference, inputs), role: 'reference' });
  const probes: TestCase[] = [];
  for (const r of results) {
    if (r.verdict === 'sandbox_error') throw new Error(`${source.problem.id}: the sandbox failed on a probe: ${r.message ?? 'no detail'}`);
    if (r.verdict !== 'accepted' || r.output === undefined) continue;
    const probe = withExpectedOutput(inputs[r.test]!, r.output);
    if (probe) probes.push(probe);
  }
  return probes;
}
