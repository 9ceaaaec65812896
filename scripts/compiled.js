// Whether dist/ holds a build of the sources as they are now. bin/crucible.js runs dist/ only
// then; otherwise it runs the TypeScript sources, so an edit is never hidden by an older build.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** What the build compiles or copies (paths from the repository root). */
export const BUILD_INPUTS = ['src', 'bench', 'test/support', 'scripts/build.js'];
export const DIST = 'dist';
/** Written last by the build: its mtime is when the build started reading its inputs, its
 * content the number of input files then. */
export const STAMP = path.join(DIST, '.built');

/** Files the build leaves out: tests (vitest runs them from the sources) and documentation. */
const notBuilt = (name) => name.endsWith('.test.ts') || name.endsWith('.md') || name === '__pycache__';

/** The files the build reads, with their mtimes (Python's byte-code caches left out: the
 * sandbox never writes them, a tool run by hand may). */
export function inputFiles(root) {
  const files = [];
  const walk = (p) => {
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) return;
    if (!st.isDirectory()) return void files.push({ file: p, mtimeMs: st.mtimeMs });
    for (const name of readdirSync(p)) if (!notBuilt(name)) walk(path.join(p, name));
  };
  for (const input of BUILD_INPUTS) walk(path.join(root, input));
  return files;
}

/**
 * Why dist/ under `root` is not a build of its inputs as they are now, or null when it is: it is
 * stale when missing, when an input file is newer than the build's start, or when input files
 * were added or removed since (a count: an added file may carry an older mtime).
 */
export function staleness(root) {
  let stamp;
  try {
    stamp = { mtimeMs: statSync(path.join(root, STAMP)).mtimeMs, files: Number(readFileSync(path.join(root, STAMP), 'utf8')) };
  } catch {
    return `no build in ${DIST}/`;
  }
  const files = inputFiles(root);
  const newer = files.find((f) => f.mtimeMs > stamp.mtimeMs);
  if (newer) return `${path.relative(root, newer.file)} is newer than the build in ${DIST}/`;
  if (files.length !== stamp.files) return `files were added or removed since the build in ${DIST}/`;
  return null;
}
