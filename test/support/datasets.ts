/** Where tests find data copied from public datasets: `CRUCIBLE_DATASETS`, by default the
 * `datasets` folder beside the repository. Tests that need it skip with this reason when it is
 * absent, so a bare clone still passes; CI sets it. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

export const DATASETS = resolve(process.env.CRUCIBLE_DATASETS ?? resolve(import.meta.dirname, '../../../shared/datasets'));
export const HAVE_DATASETS = existsSync(DATASETS);
export const NO_DATASETS = `public datasets not found at ${DATASETS} (set CRUCIBLE_DATASETS)`;
if (!HAVE_DATASETS) process.stderr.write(`crucible tests: ${NO_DATASETS}; the tests that read them are skipped\n`);
