/** Random inputs inside a spec's stated constraints (mostly small), for held-out tests. */
import type { Rng } from '../../core/rng.js';
import type { InputParam, InputSpec, InputValues } from './input-spec.js';

/** Small sizes keep held-out tests readable; `maxLen` caps list and string lengths here. */
export function randomValues(spec: InputSpec, rng: Rng, maxLen = 12): InputValues {
  const values: InputValues = {};
  for (const p of spec.params) values[p.name] = randomParam(p, rng, maxLen);
  return values;
}

function randomInt(rng: Rng, min: number, max: number): number {
  // Half the draws near zero, where boundaries and small cases live.
  if (rng.next() < 0.5) {
    const lo = Math.max(min, -10);
    const hi = Math.min(max, 10);
    if (lo <= hi) return rng.between(lo, hi);
  }
  return rng.between(min, max);
}

function randomParam(p: InputParam, rng: Rng, maxLen: number): number | number[] | string {
  if (p.type === 'int') return randomInt(rng, p.min, p.max);
  const len = rng.between(p.minLen, Math.max(p.minLen, Math.min(p.maxLen, maxLen)));
  if (p.type === 'str') {
    let s = '';
    for (let i = 0; i < len; i++) s += p.alphabet[rng.between(0, p.alphabet.length - 1)];
    return s;
  }
  const out: number[] = [];
  const narrow = rng.next() < 0.5;
  for (let i = 0; i < len * 4 && out.length < len; i++) {
    const v = narrow ? randomInt(rng, p.min, p.max) : rng.between(p.min, p.max);
    if (p.distinct && out.includes(v)) continue;
    out.push(v);
  }
  if (p.sorted) out.sort((a, b) => a - b);
  return out;
}
