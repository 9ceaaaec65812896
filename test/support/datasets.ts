/** Where tests find data copied from public datasets: `CRUCIBLE_DATASETS`, by default the
 * `datasets` folder beside the repository. Tests that need it skip with this reason when it is
 * absent, so a bare clone still passes; CI sets it and requires it (`CRUCIBLE_REQUIRE`). */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { capability } from './require.js';

export const DATASETS = resolve(process.env.CRUCIBLE_DATASETS ?? resolve(import.meta.dirname, '../../../shared/datasets'));
export const NO_DATASETS = `public datasets not found at ${DATASETS} (set CRUCIBLE_DATASETS)`;
export const HAVE_DATASETS = capability('datasets', existsSync(DATASETS) ? null : NO_DATASETS) === null;
if (!HAVE_DATASETS) process.stderr.write(`crucible tests: ${NO_DATASETS}; the tests that read them are skipped\n`);
