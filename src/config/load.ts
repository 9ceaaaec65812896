import { readFileSync } from 'node:fs';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { RunConfig } from './schema.js';
import { ConfigError } from './errors.js';

export { ConfigError };

/** Applies `a.b.c=value` overrides; the value is read as a YAML scalar (numbers, booleans...). */
export function applyOverrides(raw: Record<string, unknown>, overrides: readonly string[]): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const item of overrides) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new ConfigError(`--set ${item}: expected key=value`);
    const path = item.slice(0, eq).split('.');
    let value: unknown;
    try {
      value = parseYaml(item.slice(eq + 1));
    } catch {
      value = item.slice(eq + 1);
    }
    let node: Record<string, unknown> = out;
    for (const key of path.slice(0, -1)) {
      const next = node[key];
      if (next === undefined) node[key] = {};
      else if (typeof next !== 'object' || next === null || Array.isArray(next)) {
        throw new ConfigError(`--set ${item}: "${key}" is not a section`);
      }
      node = node[key] as Record<string, unknown>;
    }
    node[path[path.length - 1]!] = value;
  }
  return out;
}

function describeIssues(error: z.ZodError, where: string): string {
  return error.issues
    .map((issue) => {
      const key = issue.path.join('.') || '(top level)';
      if (issue.code === 'unrecognized_keys') {
        const prefix = issue.path.length ? `${issue.path.join('.')}.` : '';
        return `${where}: unknown key ${issue.keys.map((k) => `"${prefix}${k}"`).join(', ')}`;
      }
      return `${where}: ${key}: ${issue.message}`;
    })
    .join('\n');
}

export function parseConfig(raw: unknown, where = 'config'): RunConfig {
  if (raw === null || raw === undefined) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(`${where}: the top level must be a mapping`);
  const result = RunConfig.safeParse(raw);
  if (!result.success) throw new ConfigError(describeIssues(result.error, where));
  return result.data;
}

export interface LoadOptions {
  overrides?: readonly string[];
  seed?: number;
}

export function loadConfigFile(path: string, options: LoadOptions = {}): RunConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config ${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (err) {
    const pos = err instanceof YAMLParseError && err.linePos ? ` at line ${err.linePos[0].line}` : '';
    throw new ConfigError(`${path}: not valid YAML${pos}: ${(err as Error).message.split('\n')[0]}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(`${path}: the top level must be a mapping`);
  }
  let merged = applyOverrides(raw as Record<string, unknown>, options.overrides ?? []);
  if (options.seed !== undefined) merged = { ...merged, seed: options.seed };
  return parseConfig(merged, path);
}
