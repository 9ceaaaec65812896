// piscina worker: the comparison (./compare.ts), compiled beside this file in dist/ (see
// scripts/build.js), else loaded from the TypeScript sources through tsx as bin/crucible.js does.
import { existsSync } from 'node:fs';

const compiled = existsSync(new URL('./compare.js', import.meta.url));
if (!compiled) (await import('tsx/esm/api')).register();
const { compareText } = await import(compiled ? './compare.js' : './compare.ts');

export default function compare({ output, expected, mode }) {
  return compareText(output, expected, mode);
}
