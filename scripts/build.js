// `npm run build` (run by `npm ci` as the `prepare` script): compiles src/, bench/ and
// test/support/ (which benchmarks import) to JavaScript in dist/, one file per module, with
// esbuild (the transform tsx applies to the sources, so both run the same code), and copies the
// files the code reads beside itself at run time (the sandbox's Python, the demo problems, the
// piscina workers). Type checking is `npm run typecheck`'s job.
import { copyFileSync, mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { DIST, inputFiles, STAMP } from './compiled.js';

/** Packages of hundreds of ES modules each (kysely 263, zod 95): loading them file by file was
 * most of `crucible runs`' start-up, so each is bundled into one file, dist/vendor/<name>.js,
 * which the compiled code imports instead. No installed package imports them, so no second copy
 * meets these. */
const VENDORED = ['kysely', 'zod'];

const root = fileURLToPath(new URL('..', import.meta.url));
const started = new Date();
const inputs = inputFiles(root);
const rel = (f) => path.relative(root, f.file);
const isCode = (f) => f.endsWith('.ts') && !f.endsWith('.d.ts');
// The build's own script is an input (a change to it makes the build stale), not an output.
const skipped = (f) => f.startsWith('scripts/');
const out = path.join(root, DIST);
const common = { absWorkingDir: root, format: 'esm', platform: 'node', target: 'node20', logLevel: 'warning' };

rmSync(out, { recursive: true, force: true });
for (const name of VENDORED) {
  await build({ ...common, stdin: { contents: `export * from '${name}';`, resolveDir: root }, bundle: true, outfile: path.join(out, 'vendor', `${name}.js`) });
}

/** Every import stays as written (each module is its own file, as in the sources), except a
 * vendored package's, which names its bundle relative to the importing module's output. */
const keepImports = {
  name: 'keep-imports',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      if (!VENDORED.includes(args.path)) return { path: args.path, external: true };
      const from = path.dirname(path.join(out, path.relative(root, args.importer)));
      const bundle = path.relative(from, path.join(out, 'vendor', `${args.path}.js`));
      return { path: bundle.startsWith('.') ? bundle : `./${bundle}`, external: true };
    });
  },
};
const code = inputs.map(rel).filter((f) => isCode(f) && !skipped(f));
await build({ ...common, entryPoints: code, outdir: DIST, outbase: '.', bundle: true, plugins: [keepImports] });

const assets = inputs.map(rel).filter((f) => !isCode(f) && !skipped(f));
for (const f of assets) {
  mkdirSync(path.dirname(path.join(out, f)), { recursive: true });
  copyFileSync(path.join(root, f), path.join(out, f));
}
// Last, so that an interrupted build leaves no stamp; dated when the inputs were listed, so
// that a source edited during the build makes it stale.
writeFileSync(path.join(root, STAMP), String(inputs.length));
utimesSync(path.join(root, STAMP), started, started);
process.stdout.write(
  `built ${DIST}/: ${code.length} modules, ${VENDORED.length} packages bundled, ${assets.length} files copied, in ${Date.now() - started.getTime()} ms\n`,
);
