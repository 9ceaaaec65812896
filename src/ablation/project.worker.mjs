// piscina worker: projects one variant's events (./project.ts), loading the TypeScript through
// tsx as bin/crucible.js does.
import { register } from 'tsx/esm/api';

register();
const { projectVariant } = await import('./project.ts');

export default function project(job) {
  return projectVariant(job);
}
