import { describe, expect, it } from 'vitest';
import { describeBlas, installCommand, systemChecks, type Check } from '../../src/cli/system.js';

const check = (name: string, debian: string, ok: boolean, forRun = false): Check => ({ name, ok, detail: '', debian, usedBy: '', forTests: true, forRun });

describe('system checks', () => {
  it('install only what is missing: everything the tests need, or only what a run needs', () => {
    const checks = [
      check('python3', 'python3', false, true),
      check('bubblewrap', 'bubblewrap', true, true),
      check('torch', 'python3-torch', false),
      check('node', 'nodejs', false),
    ];
    expect(installCommand(checks)?.slice(4)).toEqual(['python3', 'python3-torch']);
    expect(installCommand(checks, 'run')?.slice(4)).toEqual(['python3']);
    expect(installCommand(checks.map((c) => ({ ...c, ok: true })))).toBeNull();
  });

  it('report this machine: every check names its Debian package and what uses it', () => {
    const checks = systemChecks();
    expect(checks.map((c) => c.name)).toEqual(expect.arrayContaining(['python3', 'bubblewrap', 'nats-server', 'torch', 'numpy', 'openssl']));
    for (const c of checks) {
      expect(c.debian, c.name).not.toBe('');
      expect(c.usedBy, c.name).not.toBe('');
    }
  });
});

describe('which BLAS torch uses', () => {
  it('names OpenBLAS, MKL or the reference BLAS from the libraries torch loaded', () => {
    const debian = 'generic';
    expect(describeBlas({ blasInfo: debian, libs: ['/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3'] })).toEqual({
      kind: 'openblas',
      detail: 'OpenBLAS (pthread): /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 (built with BLAS_INFO=generic)',
    });
    expect(describeBlas({ blasInfo: debian, libs: ['/usr/lib/x86_64-linux-gnu/blas/libblas.so.3'] })).toMatchObject({ kind: 'reference' });
    expect(describeBlas({ blasInfo: 'mkl', libs: [] })).toMatchObject({ kind: 'mkl' });
    expect(describeBlas({ blasInfo: null, libs: [] })).toMatchObject({ kind: 'unknown' });
  });

  it('the report has a torch BLAS line that installing libopenblas0-pthread fixes', () => {
    const checks = systemChecks();
    const torch = checks.find((c) => c.name === 'torch')!;
    const blas = checks.find((c) => c.name === 'torch BLAS');
    if (!torch.ok) return expect(blas).toBeUndefined();
    expect(blas?.detail).toMatch(/^(OpenBLAS|MKL|the reference BLAS|no BLAS library)/);
    expect(blas?.debian).toBe('libopenblas0-pthread');
    // the package is among what --install installs for the tests
    expect(checks.find((c) => c.name === 'openblas')).toMatchObject({ debian: 'libopenblas0-pthread', forTests: true });
  });
});

describe('a run and isolation', () => {
  it('requires an isolated sandbox unless the config says executor.isolation: none', async () => {
    const { parseConfig } = await import('../../src/config/load.js');
    const { sandboxOptions } = await import('../../src/actors/run.js');
    expect(sandboxOptions(parseConfig({})).requireIsolation).toBe(true);
    expect(sandboxOptions(parseConfig({ executor: { isolation: 'bwrap' } })).requireIsolation).toBe(true);
    expect(sandboxOptions(parseConfig({ executor: { isolation: 'none' } }))).toMatchObject({ isolation: 'none', requireIsolation: false });
  });
});
