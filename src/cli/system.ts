/**
 * What this machine has of the system pieces crucible uses, and the Debian package for each.
 * `crucible doctor` prints it; `crucible doctor --install` (npm's pretest) installs what is
 * missing when it runs as root with apt-get, and otherwise prints the exact command.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface Check {
  name: string;
  ok: boolean;
  /** Version or what was found; the reason when missing. */
  detail: string;
  /** Debian package that provides it. */
  debian: string;
  /** What needs it. */
  usedBy: string;
  /** Tests (npm test) need it. */
  forTests: boolean;
  /** `crucible run` on the demo needs it (the run refuses verdicts without bubblewrap). */
  forRun?: boolean;
}

export const SYSTEM_PYTHON = '/usr/bin/python3';

function run(cmd: string, args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 20_000 });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() };
}

function onPath(bin: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/bin', '/usr/sbin', '/bin', '/sbin'])) {
    if (dir && existsSync(`${dir}/${bin}`)) return `${dir}/${bin}`;
  }
  return null;
}

function pythonModule(mod: string): { ok: boolean; detail: string } {
  if (!existsSync(SYSTEM_PYTHON)) return { ok: false, detail: `${SYSTEM_PYTHON} is missing` };
  const r = run(SYSTEM_PYTHON, ['-c', `import ${mod}; print(${mod}.__version__)`]);
  return r.ok ? { ok: true, detail: r.out.split('\n').pop() ?? '' } : { ok: false, detail: `not importable by ${SYSTEM_PYTHON}` };
}

export function systemChecks(): Check[] {
  const checks: Check[] = [];
  const major = Number(process.versions.node.split('.')[0]);
  checks.push({ name: 'node', ok: major >= 20, detail: process.versions.node, debian: 'nodejs', usedBy: 'everything (Node >= 20)', forTests: true });
  const py = existsSync(SYSTEM_PYTHON) ? run(SYSTEM_PYTHON, ['--version']) : { ok: false, out: 'missing' };
  checks.push({
    name: 'python3',
    ok: py.ok,
    detail: py.ok ? `${py.out} at ${SYSTEM_PYTHON}` : `${SYSTEM_PYTHON} missing`,
    debian: 'python3',
    usedBy: 'the sandbox, the demo catalog, gpu-bridge',
    forTests: true,
    forRun: true,
  });
  const numpy = pythonModule('numpy');
  checks.push({ name: 'numpy', ...numpy, debian: 'python3-numpy', usedBy: 'dataset programs that import numpy (sandbox agreement tests)', forTests: true });
  const torch = pythonModule('torch');
  checks.push({ name: 'torch', ...torch, debian: 'python3-torch', usedBy: 'gpu-bridge (toy backend on CPU)', forTests: true });
  const bwrap = onPath('bwrap');
  let bwrapDetail = 'not installed: programs run with rlimits and seccomp only';
  let bwrapOk = false;
  if (bwrap) {
    const r = run(bwrap, ['--ro-bind', '/', '/', '--unshare-net', '--unshare-pid', '--die-with-parent', 'true']);
    bwrapOk = r.ok;
    bwrapDetail = r.ok ? `${bwrap} (namespaces work)` : `${bwrap} installed but refused here: ${r.out.slice(0, 120)}`;
  }
  checks.push({
    name: 'bubblewrap',
    ok: bwrapOk,
    detail: bwrapDetail,
    debian: 'bubblewrap',
    usedBy: 'sandbox isolation (namespaces, read-only root)',
    forTests: true,
    forRun: true,
  });
  const nats = onPath('nats-server');
  let natsDetail = 'not installed';
  if (nats) {
    try {
      natsDetail = `${execFileSync(nats, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim()} at ${nats}`;
    } catch (e) {
      natsDetail = `${nats} does not answer --version: ${(e as Error).message}`;
    }
  }
  checks.push({
    name: 'nats-server',
    ok: nats !== null,
    detail: natsDetail,
    debian: 'nats-server',
    usedBy: 'the JetStream event log and its tests',
    forTests: true,
  });
  const ipBin = onPath('ip');
  checks.push({
    name: 'iproute2',
    ok: ipBin !== null,
    detail: ipBin ?? 'not installed',
    debian: 'iproute2',
    usedBy: 'multi-host tests (network namespaces joined by veth links)',
    forTests: true,
  });
  const openssl = onPath('openssl');
  checks.push({
    name: 'openssl',
    ok: openssl !== null,
    detail: openssl ?? 'not installed',
    debian: 'openssl',
    usedBy: '`crucible nats up --tls` (a CA and server certificates) and its tests',
    forTests: true,
  });
  // torch on CPU spends its time in BLAS: the reference libblas3 is about 20x slower than OpenBLAS.
  const openblas = run('dpkg-query', ['-W', '-f=${Status}', 'libopenblas0-pthread']);
  const openblasOk = openblas.ok && openblas.out.includes('install ok installed');
  checks.push({
    name: 'openblas',
    ok: openblasOk,
    detail: openblasOk ? 'libopenblas0-pthread installed' : 'not installed: torch on CPU uses the reference BLAS',
    debian: 'libopenblas0-pthread',
    usedBy: 'gpu-bridge on CPU (the neural demo, serve, the bridge tests): Debian makes it the libblas.so.3 torch loads',
    forTests: true,
  });
  const blas = torch.ok ? torchBlas() : null;
  if (blas) {
    checks.push({
      name: 'torch BLAS',
      ok: blas.kind !== 'reference',
      detail: blas.detail,
      debian: 'libopenblas0-pthread',
      usedBy: 'torch on CPU: every matrix product of gpu-bridge',
      forTests: false,
    });
  }
  const chromium = onPath('chromium');
  let chromiumDetail = 'not installed';
  if (chromium) {
    const r = run(chromium, ['--version']);
    chromiumDetail = r.ok ? `${r.out.split('\n')[0]} at ${chromium}` : `${chromium} does not answer --version`;
  }
  checks.push({
    name: 'chromium',
    ok: chromium !== null,
    detail: chromiumDetail,
    debian: 'chromium',
    usedBy: 'the browser test of `crucible report` (headless)',
    forTests: true,
  });
  return checks;
}

export interface BlasFacts {
  /** BLAS_INFO of `torch.__config__.show()` (how torch was built: generic, mkl, open, ...). */
  blasInfo: string | null;
  /** The BLAS libraries mapped into a python that imported torch (real paths). */
  libs: string[];
}

export type BlasKind = 'openblas' | 'mkl' | 'reference' | 'unknown';

/** Which BLAS torch runs on, from what it was built with and what it loaded: Debian's torch is
 * built against the generic libblas.so.3, which is whichever alternative is installed (the
 * reference libblas3, or OpenBLAS once libopenblas0-* is). */
export function describeBlas(f: BlasFacts): { kind: BlasKind; detail: string } {
  const lib = (re: RegExp) => f.libs.find((l) => re.test(l));
  const built = f.blasInfo ? `built with BLAS_INFO=${f.blasInfo}` : 'build info unknown';
  const open = lib(/openblas/i);
  if (open) {
    const variant = /openblas-(pthread|openmp|serial)/.exec(open)?.[1];
    return { kind: 'openblas', detail: `OpenBLAS${variant ? ` (${variant})` : ''}: ${open} (${built})` };
  }
  const mkl = lib(/mkl/i);
  if (mkl || f.blasInfo === 'mkl') return { kind: 'mkl', detail: `MKL${mkl ? `: ${mkl}` : ''} (${built})` };
  const ref = lib(/\/blas\/libblas\.so/);
  if (ref) return { kind: 'reference', detail: `the reference BLAS (libblas3, about 20x slower than OpenBLAS): ${ref} (${built})` };
  return { kind: 'unknown', detail: `no BLAS library among those loaded (${built}${f.libs.length ? `; ${f.libs.join(', ')}` : ''})` };
}

const BLAS_PROBE = `
import json, os, re, torch
info = re.search(r"BLAS_INFO=(\\w+)", torch.__config__.show())
torch.ones(64, 64) @ torch.ones(64, 64)
libs = set()
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if re.search(r"blas|mkl", os.path.basename(path), re.I):
        libs.add(os.path.realpath(path))
print(json.dumps({"blasInfo": info.group(1) if info else None, "libs": sorted(libs)}))
`;

function torchBlas(): { kind: BlasKind; detail: string } | null {
  const r = spawnSync(SYSTEM_PYTHON, ['-c', BLAS_PROBE], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) return { kind: 'unknown', detail: `could not ask torch: ${(r.stderr ?? '').trim().split('\n').pop() ?? ''}` };
  try {
    return describeBlas(JSON.parse(r.stdout) as BlasFacts);
  } catch {
    return { kind: 'unknown', detail: `unreadable answer from torch: ${r.stdout.slice(0, 120)}` };
  }
}

/** The apt-get command that installs every missing piece the tests need. */
export function installCommand(checks: readonly Check[], only: 'tests' | 'run' = 'tests'): string[] | null {
  const wanted = (c: Check) => (only === 'run' ? c.forRun === true : c.forTests);
  const pkgs = [...new Set(checks.filter((c) => !c.ok && wanted(c) && c.debian !== 'nodejs').map((c) => c.debian))];
  // A bwrap that is installed but refused by the kernel is not fixed by installing it again.
  const missing = pkgs.filter((p) => p !== 'bubblewrap' || !onPath('bwrap'));
  return missing.length > 0 ? ['apt-get', 'install', '-y', '--no-install-recommends', ...missing] : null;
}
