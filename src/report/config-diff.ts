/**
 * The settings in which runs differ: each run's recorded config flattened to dotted keys
 * (`rewards.alpha`), and the keys whose values are not all equal. Pure; `crucible compare`
 * prints it. A key a run's config lacks (another method's section) is undefined for that run.
 */
import { canonicalJson } from '../core/canonical-json.js';

export interface ConfigDifference {
  key: string;
  /** One per run, in the order given; undefined where the run's config has no such key. */
  values: unknown[];
}

/** A config as dotted keys and leaf values (arrays are leaves: compared whole). */
export function flattenConfig(config: unknown, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (config !== null && typeof config === 'object' && !Array.isArray(config)) {
    for (const [k, v] of Object.entries(config as Record<string, unknown>)) {
      for (const [key, value] of flattenConfig(v, prefix === '' ? k : `${prefix}.${k}`)) out.set(key, value);
    }
    return out;
  }
  if (prefix !== '') out.set(prefix, config);
  return out;
}

/** The keys whose values differ between the runs' configs, sorted by key. */
export function configDiff(configs: readonly unknown[]): ConfigDifference[] {
  const flat = configs.map((c) => flattenConfig(c));
  const keys = [...new Set(flat.flatMap((f) => [...f.keys()]))].sort();
  const same = (a: unknown, b: unknown) => (a === undefined || b === undefined ? a === b : canonicalJson(a) === canonicalJson(b));
  return keys.map((key) => ({ key, values: flat.map((f) => f.get(key)) })).filter(({ values }) => values.some((v) => !same(v, values[0])));
}

/** A config value as one short cell ('-' for a key the run's config lacks). */
export function formatSetting(value: unknown): string {
  return value === undefined ? '-' : typeof value === 'string' ? value : JSON.stringify(value);
}
