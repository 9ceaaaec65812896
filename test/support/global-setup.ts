/**
 * Once per `vitest run`: a scratch directory for the demo catalogs that runs build (keyed by
 * problems, seed and sizes; see prepareRun), so that test files running the same small config
 * build its catalog once. Removed when the run ends.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-test-catalogs-'));
  project.provide('catalogCache', dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
