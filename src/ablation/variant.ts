/**
 * A variant: a name and config keys overriding the run's recorded config. What a variant can
 * answer is decided here, before any event is read: what the actors did (samples, executions,
 * training) is fixed by the log, so a variant may change only settings the Judge reads after the
 * recorded executions. Anything upstream of them is refused with the reason.
 */
import { createHash } from 'node:crypto';
import { RunConfig, type Method } from '../config/schema.js';
import { canonicalJson } from '../core/canonical-json.js';
import { VariantRefusedError } from './errors.js';

export interface Override {
  key: string;
  value: unknown;
}

export interface VariantSpec {
  name: string;
  overrides: Override[];
}

export interface Variant extends VariantSpec {
  /** The recorded config with the overrides applied (validated). */
  config: RunConfig;
  /** sha256 of the variant's effective config. */
  settingsHash: string;
  /** Whether the effective config is the recorded run's (the variant re-derives the run itself). */
  sameAsRecorded: boolean;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** The Code-A1 family: the methods whose judgement reads the Mistake Book and TOPVAR. */
const BOOK_METHODS: readonly Method[] = ['code-a1', 'self-play'];

/** Settings a variant re-derives from the recorded executions. */
const ANSWERABLE: Record<string, { methods: readonly Method[] | 'all' }> = {
  'rewards.alpha': { methods: BOOK_METHODS },
  'rewards.std': { methods: 'all' },
  'mistakeBook.enabled': { methods: BOOK_METHODS },
  'mistakeBook.replay': { methods: BOOK_METHODS },
  'mistakeBook.cap': { methods: BOOK_METHODS },
  'mistakeBook.decay': { methods: BOOK_METHODS },
  'mistakeBook.blacklist': { methods: BOOK_METHODS },
  'codeA1.mistakeBookRule': { methods: BOOK_METHODS },
  'codeA1.codeGroupFilter': { methods: BOOK_METHODS },
  'selection.testSamples': { methods: BOOK_METHODS },
  'tcs.bufferSize': { methods: ['tcs'] },
  'tcs.validityWeight': { methods: ['tcs'] },
  'tcs.counterexampleWeight': { methods: ['tcs'] },
  'tcs.counterexample': { methods: ['tcs'] },
  'cure.postStage': { methods: ['cure'] },
  'cure.enableEfficient': { methods: ['cure'] },
  'cure.lengthRegularize': { methods: ['cure'] },
  'cure.maxLenThreshold': { methods: ['cure'] },
  'cure.minLenThreshold': { methods: ['cure'] },
  'ace.suspectLabel': { methods: ['ace'] },
  'ace.minProgramsForSuspect': { methods: ['ace'] },
  method: { methods: BOOK_METHODS },
};

/** Settings that shape which Mistake Book tests are replayed, i.e. which executions a variant needs. */
export const BOOK_SETTINGS = [
  'mistakeBook.enabled',
  'mistakeBook.replay',
  'mistakeBook.cap',
  'mistakeBook.decay',
  'mistakeBook.blacklist',
  'codeA1.mistakeBookRule',
];

const SAMPLES_FIXED = 'a variant re-judges the samples the log holds, not the samples another setting would have drawn';

/** Settings upstream of the recorded executions, by key or section prefix, with the reason. */
const UPSTREAM: readonly [string, string][] = [
  ['sampling.', `sampling happens before the Judge: the log holds the programs and tests drawn with the recorded setting, and ${SAMPLES_FIXED}`],
  ['policies.', `the policies drew the recorded samples; ${SAMPLES_FIXED}`],
  ['learner.', `training happened after the recorded judgement and drew the later rounds' samples, which the log fixes; ${SAMPLES_FIXED}`],
  ['seed', `the seed drew the recorded samples; ${SAMPLES_FIXED}`],
  ['rounds', 'the log holds the rounds that ran (use --round to stop earlier)'],
  ['dataset.', 'the problems are those the run recorded'],
  ['executor.', 'the verdicts are the recorded executions: a variant runs no program'],
  ['tcs.switchRule', "the Conductor decided each round's TCS stage from it (StageDecided), and the stage chose what later rounds sampled"],
  ['evolvecoder.', "EvolveCoder's selections decide which tests later rounds execute (TestsEvolved), so a variant would need executions the log lacks"],
  ['name', 'not a setting of the judgement'],
  ['dir', 'not a setting of the judgement'],
  ['log.', 'not a setting of the judgement'],
];

function parseValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** `NAME:key=value,key=value` (an empty list: the recorded settings themselves). */
export function parseVariantSpec(spec: string): VariantSpec {
  const colon = spec.indexOf(':');
  const name = colon < 0 ? spec : spec.slice(0, colon);
  if (!NAME.test(name))
    throw new VariantRefusedError(name || '(unnamed)', null, `"${spec}": expected NAME:key=value,... with a name of letters, digits, '.', '_' or '-'`);
  const body = colon < 0 ? '' : spec.slice(colon + 1).trim();
  const overrides: Override[] = [];
  for (const part of body === '' ? [] : body.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new VariantRefusedError(name, null, `"${part}": expected key=value`);
    const key = part.slice(0, eq).trim();
    if (overrides.some((o) => o.key === key)) throw new VariantRefusedError(name, key, 'set twice');
    overrides.push({ key, value: parseValue(part.slice(eq + 1).trim()) });
  }
  return { name, overrides };
}

function setPath(target: Record<string, unknown>, key: string, value: unknown, variant: string): void {
  const parts = key.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) throw new VariantRefusedError(variant, key, 'unknown setting');
    node = next as Record<string, unknown>;
  }
  node[parts.at(-1)!] = value;
}

/** Whether a key may change in a variant of a run of `method`; throws the refusal otherwise. */
function checkKey(variant: string, key: string, value: unknown, method: Method): void {
  const answerable = ANSWERABLE[key];
  if (answerable) {
    if (answerable.methods !== 'all' && !answerable.methods.includes(method)) {
      throw new VariantRefusedError(variant, key, `has no effect on the judgement of a ${method} run`);
    }
    if (key === 'method' && !(BOOK_METHODS as readonly unknown[]).includes(value)) {
      throw new VariantRefusedError(
        variant,
        key,
        `${String(value)} judges other executions than ${method} (its own test validity and test sets); the log holds ${method}'s, and --execute runs only the Mistake Book replays a variant adds`,
      );
    }
    return;
  }
  for (const [prefix, reason] of UPSTREAM) {
    if (key === prefix || (prefix.endsWith('.') && key.startsWith(prefix)))
      throw new VariantRefusedError(variant, key, `cannot be answered from the log: ${reason}`);
  }
  throw new VariantRefusedError(variant, key, 'unknown setting, or not one a variant can change');
}

/** The variant's config: the recorded one with the overrides, each checked and the whole validated. */
export function resolveVariant(spec: VariantSpec, recorded: RunConfig): Variant {
  for (const o of spec.overrides) checkKey(spec.name, o.key, o.value, recorded.method);
  const raw = structuredClone(recorded) as unknown as Record<string, unknown>;
  for (const o of spec.overrides) setPath(raw, o.key, o.value, spec.name);
  const parsed = RunConfig.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new VariantRefusedError(spec.name, issue.path.join('.') || null, issue.message);
  }
  const config = parsed.data;
  const text = canonicalJson(config);
  return { ...spec, config, settingsHash: createHash('sha256').update(text).digest('hex'), sameAsRecorded: text === canonicalJson(recorded) };
}
