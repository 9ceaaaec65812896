import { createHash } from 'node:crypto';
import { canonicalJson } from '../../../core/canonical-json.js';
import type { TestCase } from '../../../core/problem.js';

/** The canonical text a test's input is identified and deduplicated by (expected values aside). */
export function testKey(t: TestCase): string {
  if (t.style === 'stdio') return `stdio:${t.input}`;
  if (t.style === 'call') return `call:${canonicalJson(t.args)}`;
  return `assert:${t.code}`;
}

/** "t:" + 12 hex of sha256 over the test key: stable whatever the order or count. */
export function testIdOf(t: TestCase): string {
  return `t:${createHash('sha256').update(testKey(t)).digest('hex').slice(0, 12)}`;
}
