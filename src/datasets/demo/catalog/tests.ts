/**
 * A problem's candidate tests for the catalog test policy: EvalPlus-style type-aware mutation of
 * the example inputs. Some candidates break the stated constraints on purpose (the reference
 * rejects them and the Judge marks them invalid). No expected values: the Judge gets oracles
 * from the reference. No candidate equals a held-out input (CatalogSource.avoid).
 */
import { argsToValues, parseStdio, printStdio, valuesToArgs, type InputParam, type InputSpec, type InputValues } from '../input-spec.js';
import { randomValues } from '../random-input.js';
import type { TestCase } from '../../../core/problem.js';
import { Rng } from '../../../core/rng.js';
import type { CatalogSource } from './source.js';
import { testIdOf, testKey } from './test-key.js';

export { testIdOf, testKey } from './test-key.js';

export interface CandidateTest {
  /** "t:" + 12 hex of sha256 over the canonical test: stable whatever the order or count. */
  testId: string;
  test: TestCase;
  /** How it was made: "example", "random", or "<param>:<mutation>". */
  origin: string;
}

export interface TestCatalogOptions {
  /** Candidate tests per problem (default 48). Examples are always kept. */
  count?: number;
  seed?: number;
}

type Value = number | number[] | string;

function intMutations(p: Extract<InputParam, { type: 'int' }>, v: number): [string, number][] {
  return [
    ['zero', 0],
    ['one', 1],
    ['minus-one', -1],
    ['plus1', v + 1],
    ['minus1', v - 1],
    ['min', p.min],
    ['max', p.max],
    ['below-min', p.min - 1],
    ['above-max', p.max + 1],
    ['double', v * 2],
    ['half', Math.trunc(v / 2)],
    ['two', 2],
    ['negated', -v],
  ];
}

function listMutations(p: Extract<InputParam, { type: 'int[]' }>, v: number[], rng: Rng): [string, number[]][] {
  const fill = (n: number) => Array.from({ length: n }, () => rng.between(p.min, p.max));
  const out: [string, number[]][] = [
    ['empty', []],
    ['reversed', v.slice().reverse()],
    ['sorted', v.slice().sort((a, b) => a - b)],
    ['sorted-desc', v.slice().sort((a, b) => b - a)],
    ['large', fill(p.maxLen)],
    ['too-long', fill(p.maxLen + 1)],
    ['all-min', v.map(() => p.min)],
    ['all-max', v.map(() => p.max)],
  ];
  if (v.length > 0) {
    const first = v[0] as number;
    out.push(
      ['single', [first]],
      ['duplicates', [...v, first]],
      ['all-same', v.map(() => first)],
      ['elem-below-min', [p.min - 1, ...v.slice(1)]],
      ['elem-above-max', [...v.slice(0, -1), p.max + 1]],
      ['negated', v.map((x) => -x)],
      ['drop-last', v.slice(0, -1)],
    );
  }
  return out;
}

function strMutations(p: Extract<InputParam, { type: 'str' }>, v: string, rng: Rng): [string, string][] {
  const pick = () => p.alphabet[rng.between(0, p.alphabet.length - 1)] as string;
  const long = (n: number) => Array.from({ length: n }, pick).join('');
  const out: [string, string][] = [
    ['empty', ''],
    ['one-char', v.slice(0, 1) || pick()],
    ['repeated', v + v],
    ['long', long(p.maxLen)],
    ['too-long', long(p.maxLen + 1)],
    ['reversed', [...v].reverse().join('')],
  ];
  if (v.length > 0) out.push(['all-same', (v[0] as string).repeat(v.length)], ['drop-last', v.slice(0, -1)]);
  return out;
}

function mutateParam(p: InputParam, v: Value, rng: Rng): [string, Value][] {
  if (p.type === 'int') return intMutations(p, typeof v === 'number' ? v : 0);
  if (p.type === 'int[]') return listMutations(p, Array.isArray(v) ? v : [], rng);
  return strMutations(p, typeof v === 'string' ? v : '', rng);
}

function toTest(problem: CatalogSource['problem'], spec: InputSpec, values: InputValues): TestCase {
  return problem.style === 'stdio' ? { style: 'stdio', input: printStdio(spec, values), output: null } : { style: 'call', args: valuesToArgs(spec, values) };
}

function readExample(problem: CatalogSource['problem'], spec: InputSpec, t: TestCase): InputValues {
  if (t.style === 'stdio') return parseStdio(spec, t.input);
  if (t.style === 'call') return argsToValues(spec, t.args);
  throw new Error(`${problem.id}: assert-style examples cannot be mutated`);
}

/** Deterministic given (source, opts): examples first, then a seeded sample of the
 * deduplicated mutations and a few random valid inputs. */
export function buildTestCatalog(source: CatalogSource, opts: TestCatalogOptions = {}): CandidateTest[] {
  const { problem, extras } = source;
  const count = opts.count ?? 48;
  const spec = extras.inputSpec;
  const rng = Rng.derive(opts.seed ?? 0, problem.id, 'tests');
  // Held-out inputs count as seen: the pool can never offer one.
  const seen = new Set<string>(source.avoid);
  const examples: CandidateTest[] = [];
  const pool: CandidateTest[] = [];
  const add = (into: CandidateTest[], test: TestCase, origin: string) => {
    const key = testKey(test);
    if (seen.has(key)) return;
    seen.add(key);
    into.push({ testId: testIdOf(test), test, origin });
  };
  const exampleValues = source.examples.map((t) => {
    let values: InputValues;
    try {
      values = readExample(problem, spec, t);
    } catch (e) {
      throw new Error(`${problem.id}: an example does not fit the input description: ${(e as Error).message}`);
    }
    add(examples, toTest(problem, spec, values), 'example');
    return values;
  });
  for (const values of exampleValues) {
    for (const p of spec.params) {
      for (const [what, v] of mutateParam(p, values[p.name] as Value, rng)) {
        add(pool, toTest(problem, spec, { ...values, [p.name]: v }), `${p.name}:${what}`);
      }
    }
  }
  for (let i = 0; i < Math.max(4, Math.ceil(count / 8)); i++) add(pool, toTest(problem, spec, randomValues(spec, rng)), 'random');
  return [...examples, ...rng.shuffle(pool)].slice(0, Math.max(count, examples.length));
}
