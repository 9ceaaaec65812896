/**
 * JSON with object keys sorted (UTF-16 code-unit order) at every depth: equal data gives equal
 * text whatever the insertion order. Everything hashed (events, blobs, read models, policy
 * parameters, catalogs) goes through this one function.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const sorted: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
      return sorted;
    }
    return v;
  });
}
