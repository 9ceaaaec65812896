/** Whether bubblewrap isolates the sandbox here: tests that ask for it by name run their isolated
 * pass with 'bwrap' where it works (never a silent fallback) and on rlimits elsewhere, saying so;
 * `CRUCIBLE_REQUIRE=bwrap` makes its absence a failure. */
import { bwrapWorks, findBwrap } from '../../src/sandbox/isolation.js';
import { SERVER_PATH } from '../../src/sandbox/index.js';
import { capability } from './require.js';

function bwrapMissing(): string | null {
  const b = findBwrap();
  if (b === undefined) return 'bwrap is not installed';
  const check = bwrapWorks(b, '/usr/bin/python3', SERVER_PATH);
  return check.ok ? null : `bwrap does not work here: ${check.reason}`;
}

export const BWRAP_MISSING = capability('bwrap', bwrapMissing());
export const BWRAP = BWRAP_MISSING === null;
