// piscina worker: projects one variant's events, or the read models variants share
// (./project.ts), loading the TypeScript through tsx as bin/crucible.js does.
import { register } from 'tsx/esm/api';

register();
const { runJob } = await import('./project.ts');

export default function project(job) {
  return runJob(job);
}
