import { describe, expect, it } from 'vitest';
import { createSandbox, isolationReport } from '../../src/sandbox/index.js';
import { findBwrap } from '../../src/sandbox/isolation.js';
import { readdirSync } from 'node:fs';
import { cgroupRoots } from '../../src/sandbox/cgroup.js';

describe('isolation layers', () => {
  it('isolationReport probes every layer and says why one is missing', () => {
    const r = isolationReport();
    for (const k of ['bwrap', 'seccomp', 'netns', 'ipcns', 'uidDrop', 'cgroup'] as const) {
      expect(typeof r[k].ok).toBe('boolean');
      if (!r[k].ok) expect(r[k].reason).toMatch(/\w/);
    }
    expect(r.isolated).toBe(r.bwrap.ok);
    // As root on x86_64 (this project's machines) these must work.
    if (process.getuid?.() === 0 && process.arch === 'x64') {
      expect([r.seccomp.ok, r.netns.ok, r.ipcns.ok, r.uidDrop.ok]).toEqual([true, true, true, true]);
    }
    // A missing interpreter is reported per layer, not thrown.
    const bad = isolationReport({ pythonPath: '/nonexistent/python3' });
    expect(bad.seccomp.ok).toBe(false);
    expect(bad.seccomp.reason).toMatch(/ENOENT|nonexistent/);
  });

  it('requireIsolation fails closed: no sandbox without bubblewrap, none with isolation "none"', async () => {
    await expect(createSandbox({ isolation: 'none', requireIsolation: true, warn: () => undefined })).rejects.toThrow(/isolation is required/);
    if (findBwrap() && isolationReport().bwrap.ok) {
      const sb = await createSandbox({ requireIsolation: true, workers: 1 });
      const r = await sb.run({ program: 'print(1)', tests: [{ style: 'stdio', input: '', output: '1' }] });
      expect([r[0]!.verdict, r[0]!.isolated]).toEqual(['accepted', true]);
      await sb.close();
    } else {
      await expect(createSandbox({ requireIsolation: true, warn: () => undefined })).rejects.toThrow(/required but unavailable/);
    }
  });

  it('every verdict says whether a memory cgroup held it, and reports its peak when one did', async () => {
    const sb = await createSandbox({ workers: 1, isolation: 'none', warn: () => undefined });
    const r = await sb.run({ program: 'x = bytearray(40 << 20)\nprint(len(x))', tests: [{ style: 'stdio', input: '', output: String(40 << 20) }] });
    expect(r[0]!.verdict).toBe('accepted');
    expect(r[0]!.cgroup).toBe(sb.cgroup);
    if (sb.cgroup) expect(r[0]!.memoryPeakKb).toBeGreaterThan(40 << 10);
    await sb.close();
    // Closing removes the servers' cgroups.
    const roots = cgroupRoots();
    for (const dir of roots ? [roots.memory, ...(roots.pids ? [roots.pids] : [])] : []) {
      expect(readdirSync(dir).filter((n) => n.startsWith(`crucible-${process.pid}-`))).toEqual([]);
    }
    const off = await createSandbox({ workers: 1, isolation: 'none', cgroups: false, warn: () => undefined });
    const r2 = await off.run({ program: 'print(1)', tests: [{ style: 'stdio', input: '', output: '1' }] });
    expect([r2[0]!.cgroup, r2[0]!.memoryPeakKb]).toEqual([false, undefined]);
    await off.close();
  });
});
