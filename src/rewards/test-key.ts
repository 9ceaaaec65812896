/**
 * Test text helpers shared by Code-A1 validation and the Mistake Book: a canonical key for a
 * test statement, the `assert <call> == <expr>` form check (both lexical, in
 * src/core/python-text.ts: the policies read answers with them too), and the GT-corrected
 * statement.
 */
import { normalizeTestKey } from '../core/python-text.js';

export { normalizeTestKey, parseAssertCall, type AssertCall } from '../core/python-text.js';

/** The GT-corrected statement: the call with the oracle's output as the expected value. */
export function correctedStatement(call: string, oracleRepr: string): string {
  return normalizeTestKey(`assert ${call} == ${oracleRepr}`);
}
