/**
 * Turns a test policy's text into tests. One test per non-empty line, as JSON of the
 * problem's test style; the canonical form (sorted keys) is what gets hashed, so the same
 * test written twice is one blob and one cache entry.
 */
import { TestCase, type TestStyle } from '../core/problem.js';
import { canonicalJson } from '../core/canonical-json.js';

export type ParsedTest = { ok: true; test: TestCase; canonical: string } | { ok: false; reason: string; canonical: string };

export function parseTestLines(text: string, style: TestStyle): ParsedTest[] {
  const out: ParsedTest[] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch {
      out.push({ ok: false, reason: 'not JSON', canonical: trimmed });
      continue;
    }
    const parsed = TestCase.safeParse(value);
    if (!parsed.success) {
      out.push({ ok: false, reason: `not a test: ${parsed.error.issues[0]?.message ?? 'invalid'}`, canonical: trimmed });
    } else if (parsed.data.style !== style) {
      out.push({ ok: false, reason: `style ${parsed.data.style}, problem wants ${style}`, canonical: trimmed });
    } else {
      out.push({ ok: true, test: parsed.data, canonical: canonicalJson(parsed.data) });
    }
  }
  return out;
}
