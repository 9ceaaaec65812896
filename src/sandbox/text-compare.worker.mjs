// piscina worker: loads the TypeScript comparison through tsx, as bin/crucible.js does.
import { register } from 'tsx/esm/api';

register();
const { compareText } = await import('./compare.ts');

export default function compare({ output, expected, mode }) {
  return compareText(output, expected, mode);
}
