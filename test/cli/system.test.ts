import { describe, expect, it } from 'vitest';
import { installCommand, systemChecks, type Check } from '../../src/cli/system.js';

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

describe('a run and isolation', () => {
  it('requires an isolated sandbox unless the config says executor.isolation: none', async () => {
    const { parseConfig } = await import('../../src/config/load.js');
    const { sandboxOptions } = await import('../../src/actors/run.js');
    expect(sandboxOptions(parseConfig({})).requireIsolation).toBe(true);
    expect(sandboxOptions(parseConfig({ executor: { isolation: 'bwrap' } })).requireIsolation).toBe(true);
    expect(sandboxOptions(parseConfig({ executor: { isolation: 'none' } }))).toMatchObject({ isolation: 'none', requireIsolation: false });
  });
});
