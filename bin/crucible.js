#!/usr/bin/env -S node --max-semi-space-size=128
// Entry point of the `crucible` command. It runs the JavaScript compiled into dist/ by `npm run
// build` (which `npm ci` runs) when that build is not older than the sources; otherwise the
// TypeScript sources through tsx's loader, so an edited checkout runs what it holds, never an
// older build, and works without a build step (only slower to start). CRUCIBLE_FROM_SOURCES=1
// runs the sources even when the build is fresh (for comparisons, and to rule the build out).
import { fileURLToPath } from 'node:url';
import { DIST, staleness } from '../scripts/compiled.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const stale = process.env.CRUCIBLE_FROM_SOURCES === '1' ? 'CRUCIBLE_FROM_SOURCES=1 is set' : staleness(root);
let main;
if (stale === null) {
  ({ main } = await import(`../${DIST}/src/cli/main.js`));
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
    process.stderr.write(`crucible: ${stale}, and tsx, which runs the TypeScript sources, is not installed: run \`npm run build\`\n`);
    process.exit(1);
  }
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
await main(process.argv);
