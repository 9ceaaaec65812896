import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder of crucible's package.json, found upwards from this module: it is at one depth
 * in the sources (src/core/) and at another in the compiled output (dist/src/core/). For the
 * files beside the sources that the code names (bin/crucible.js, gpu-bridge/, configs/). */
export const PACKAGE_ROOT = ((): string => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${here}`);
  }
})();
