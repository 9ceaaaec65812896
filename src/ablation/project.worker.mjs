// piscina worker: projects one variant's events, or the read models variants share
// (./project.ts), compiled beside this file in dist/ (see scripts/build.js), else loaded from
// the TypeScript sources through tsx as bin/crucible.js does.
import { existsSync } from 'node:fs';

const compiled = existsSync(new URL('./project.js', import.meta.url));
if (!compiled) (await import('tsx/esm/api')).register();
const { runJob } = await import(compiled ? './project.js' : './project.ts');

export default function project(job) {
  return runJob(job);
}
