#!/usr/bin/env node
// Entry point of the `crucible` command: runs the TypeScript sources through tsx's loader,
// so a checkout works without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv);
