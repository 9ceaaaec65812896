import { valuesEqual, type Tagged } from './values.js';
import type { ComparisonMode } from './api.js';

/** Pure comparison of a program's output with the expected one. Runs in Node (or a piscina
 * thread for large outputs), never inside the candidate's process. */

export const FLOAT_TOLERANCE = 1e-6;

const tokens = (s: string): string[] => s.split(/\s+/).filter((t) => t.length > 0);
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** stdin/stdout tests. `exact` is byte equality; `tokens` ignores how whitespace is laid out;
 * `float` also accepts numbers within FLOAT_TOLERANCE (absolute or relative). */
export function compareText(output: string, expected: string, mode: Exclude<ComparisonMode, 'checker'>): boolean {
  if (mode === 'exact') return output === expected;
  const a = tokens(output);
  const b = tokens(expected);
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x === y) continue;
    if (mode !== 'float' || !NUMBER.test(x) || !NUMBER.test(y)) return false;
    const fx = Number(x);
    const fy = Number(y);
    if (Math.abs(fx - fy) > FLOAT_TOLERANCE * Math.max(1, Math.abs(fy))) return false;
  }
  return true;
}

/** Call tests with JSON expectations (APPS, TACO, LiveCodeBench functional): tuples equal
 * lists, and an expected `[x]` also accepts `x` (the one-element wrapping those datasets use). */
export function compareCallValue(value: Tagged, expected: Tagged, mode: Exclude<ComparisonMode, 'checker'>): boolean {
  const opt = { strictContainers: false, tolerance: mode === 'float' ? FLOAT_TOLERANCE : 0 };
  if (valuesEqual(value, expected, opt)) return true;
  return Array.isArray(expected) && expected.length === 1 && valuesEqual(value, expected[0]!, opt);
}

/** Rewritten `assert CALL == EXPECTED`: Python's own `==` semantics on both serialized sides. */
export function compareAssertValue(value: Tagged, expected: Tagged): boolean {
  return valuesEqual(value, expected, { strictContainers: true, tolerance: 0 });
}
