/**
 * The compiled build (`npm run build`, which `npm ci` runs) in a copy of the checkout whose
 * node_modules lacks tsx: the command, a piscina thread of the sandbox and of ablate, and the
 * worker processes of `run --workers` all run the compiled JavaScript (anything that loaded the
 * TypeScript sources would fail without tsx), and find the files they read beside the code
 * (the sandbox's Python, the demo problems). A source newer than the build is never run from
 * the older build: without tsx the command says so, with tsx it runs the edited source.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputFiles, staleness } from '../../scripts/compiled.js';
import { OFFLOAD_CHARS } from '../../src/sandbox/text-compare.js';
import { smallDemoArgs } from '../support/small-config.js';
import { startTestNats, type TestNats } from '../support/nats.js';

const execFileAsync = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../..');
/** What the command needs of a checkout; tests and docs stay out. */
const COPIED = ['bin', 'scripts', 'src', 'bench', 'test/support', 'configs', 'package.json'];

let root: string;
let scratch: string;

/** node_modules of the copy: a link to each installed package but tsx (linked by `withTsx`). */
function linkPackages(): void {
  const real = realpathSync(path.join(REPO, 'node_modules'));
  const mine = path.join(root, 'node_modules');
  for (const name of readdirSync(real)) if (name !== 'tsx' && !name.startsWith('.')) symlinkSync(path.join(real, name), path.join(mine, name));
}
const tsxLink = () => path.join(root, 'node_modules', 'tsx');
const withTsx = () => symlinkSync(realpathSync(path.join(REPO, 'node_modules', 'tsx')), tsxLink());
const withoutTsx = () => rmSync(tsxLink(), { force: true });

/** Runs `f` with the copy's links to `packages` removed (and dist/vendor/'s bundles, when
 * `vendor`): a command that loaded one of them would fail. */
async function hiding<T>(packages: readonly string[], vendor: boolean, f: () => Promise<T>): Promise<T> {
  const modules = path.join(root, 'node_modules');
  const vendored = path.join(root, 'dist/vendor');
  const targets = new Map(packages.map((p) => [p, realpathSync(path.join(modules, p))]));
  for (const p of packages) rmSync(path.join(modules, p));
  if (vendor) renameSync(vendored, `${vendored}.hidden`);
  try {
    return await f();
  } finally {
    for (const [p, target] of targets) symlinkSync(target, path.join(modules, p));
    if (vendor) renameSync(`${vendored}.hidden`, vendored);
  }
}

const build = () => execFileSync(process.execPath, [path.join(root, 'scripts/build.js')], { cwd: root, encoding: 'utf8' });

async function crucible(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [path.join(root, 'bin/crucible.js'), ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      maxBuffer: 1 << 26,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-compiled-'));
  scratch = mkdtempSync(path.join(os.tmpdir(), 'crucible-compiled-runs-'));
  for (const p of COPIED) cpSync(path.join(REPO, p), path.join(root, p), { recursive: true, filter: (src) => path.basename(src) !== '__pycache__' });
  // Sources as a checkout holds them: older than the build made from them.
  const anHourAgo = new Date(Date.now() - 3_600_000);
  for (const f of inputFiles(root)) utimesSync(f.file, anHourAgo, anHourAgo);
  mkdirSync(path.join(root, 'node_modules'));
  linkPackages();
  expect(build()).toMatch(/^built dist\/: \d+ modules/);
}, 120_000);
afterAll(() => {
  for (const d of [root, scratch]) if (d) rmSync(d, { recursive: true, force: true });
});

describe('the compiled command, without tsx installed', () => {
  it('the build is fresh and --version answers from it, loading no package but commander', async () => {
    expect(staleness(root)).toBeNull();
    const others = readdirSync(path.join(root, 'node_modules')).filter((p) => p !== 'commander');
    const r = await hiding(others, true, () => crucible(['--version']));
    expect(r).toEqual({ code: 0, stdout: '0.1.0\n', stderr: '' });
  });

  it("compares a large output on the sandbox's piscina thread", async () => {
    // Both texts above the size compared off the event loop, on a thread of its own.
    const words = Math.ceil(OFFLOAD_CHARS / 3) + 1;
    writeFileSync(path.join(scratch, 'big.py'), `print("ab " * ${words})\n`);
    writeFileSync(path.join(scratch, 'big.jsonl'), `${JSON.stringify({ input: '', output: 'ab '.repeat(words) })}\n`);
    const r = await crucible(['exec', path.join(scratch, 'big.py'), '--tests', path.join(scratch, 'big.jsonl'), '--isolation', 'none', '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toMatchObject({ test: 0, verdict: 'accepted' });
  });

  it("makes a demo run (the sandbox's Python, the demo problems) and ablates it on two piscina threads", async () => {
    const runs = path.join(scratch, 'runs');
    const run = await crucible(['run', 'configs/demo.yaml', ...smallDemoArgs(runs, 2), '--json']);
    expect(run.code, run.stderr).toBe(0);
    const { runId } = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { runId: string };
    const ablate = await crucible([
      'ablate',
      path.join(runs, runId),
      '--variant',
      'a0:rewards.alpha=0',
      '--variant',
      'a5:rewards.alpha=0.5',
      '--threads',
      '2',
      '--json',
    ]);
    expect(ablate.code, ablate.stderr).toBe(0);
    const { variants } = JSON.parse(ablate.stdout) as { variants: { name: string; status: string }[] };
    expect(variants.map((v) => [v.name, v.status])).toEqual([
      ['a0', 'answered'],
      ['a5', 'answered'],
    ]);
    // `runs` reads the run without the actors' packages, the sandbox's or the browser's.
    const listed = await hiding(['xstate', '@nats-io', 'piscina', 'playwright-core', 'chart.js', 'yaml'], false, () => crucible(['runs', runs]));
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(runId);
  }, 300_000);

  describe('with a nats-server', () => {
    let nats: TestNats;
    beforeAll(async () => {
      nats = await startTestNats(1);
    }, 60_000);
    afterAll(async () => {
      await nats?.stop();
    });

    it('runs the actors as worker processes of the compiled command (run --workers)', async () => {
      const r = await crucible([
        'run',
        'configs/demo.yaml',
        ...smallDemoArgs(path.join(scratch, 'workers'), 1),
        '--log',
        nats.urls[0]!,
        '--workers',
        'executor=1',
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toMatchObject({ round: 1 });
    }, 300_000);
  });
});

describe('a build older than the sources', () => {
  const main = () => path.join(root, 'src/cli/main.ts');

  it('is not run: without tsx the command says what is stale and how to build', async () => {
    // The copy's files are dated an hour before the build (beforeAll); this edit is after it.
    writeFileSync(main(), readFileSync(main(), 'utf8').replace(".version('0.1.0')", ".version('0.1.0-edited')"));
    expect(staleness(root)).toBe(`src/cli/main.ts is newer than the build in dist/`);
    const r = await crucible(['--version']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'crucible: src/cli/main.ts is newer than the build in dist/, and tsx, which runs the TypeScript sources, is not installed: run `npm run build`\n',
    );
  });

  it('runs the edited source through tsx', async () => {
    withTsx();
    try {
      expect(await crucible(['--version'])).toEqual({ code: 0, stdout: '0.1.0-edited\n', stderr: '' });
    } finally {
      withoutTsx();
    }
  });

  it('is fresh again once rebuilt, and runs the edit compiled', async () => {
    build();
    expect(staleness(root)).toBeNull();
    expect(await crucible(['--version'])).toEqual({ code: 0, stdout: '0.1.0-edited\n', stderr: '' });
    // The sources on demand, even with a fresh build.
    const forced = await crucible(['--version'], { CRUCIBLE_FROM_SOURCES: '1' });
    expect(forced.code).toBe(1);
    expect(forced.stderr).toMatch(/^crucible: CRUCIBLE_FROM_SOURCES=1 is set, and tsx/);
  });

  it('counts a file added with an older date, or removed, as a change; documentation is no input', () => {
    writeFileSync(path.join(root, 'src/sandbox/README.md'), 'edited\n');
    expect(staleness(root)).toBeNull();
    const added = path.join(root, 'src/core/added.ts');
    writeFileSync(added, 'export const added = 1;\n');
    utimesSync(added, new Date(2000, 0, 1), new Date(2000, 0, 1));
    expect(staleness(root)).toBe('files were added or removed since the build in dist/');
    rmSync(added);
    expect(staleness(root)).toBeNull();
    rmSync(path.join(root, 'src/core/rng.ts'));
    expect(staleness(root)).toBe('files were added or removed since the build in dist/');
  });
});
