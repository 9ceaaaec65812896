/** A suite as the catalog test policy emits it: one JSON test per line. */
import { TestCase } from '../../core/problem.js';

export function serializeSuite(tests: readonly TestCase[]): string {
  return tests.map((t) => JSON.stringify(t)).join('\n');
}

/** Reads a suite back; a line that is not a JSON TestCase is an error naming the line. */
export function parseSuite(text: string): TestCase[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line, i) => {
      let raw: unknown;
      try {
        raw = JSON.parse(line);
      } catch {
        throw new Error(`suite line ${i + 1} is not JSON`);
      }
      const parsed = TestCase.safeParse(raw);
      if (!parsed.success) throw new Error(`suite line ${i + 1} is not a test: ${parsed.error.issues[0]?.message}`);
      return parsed.data;
    });
}
