import { describe, expect, it } from 'vitest';
import { chaosSchedule, describeFault, FAULT_KINDS, type ChaosOptions } from '../../bench/chaos-schedule.js';

const OPTS: ChaosOptions = {
  total: 400,
  faults: 4,
  spacing: 60,
  tail: 80,
  servers: ['n1', 'n2', 'n3'],
  processes: { executor: 2, solver: 1, adversary: 1, judge: 2 },
};

describe('chaosSchedule', () => {
  it('is the same for a seed and differs between seeds', () => {
    expect(chaosSchedule(7, OPTS)).toEqual(chaosSchedule(7, OPTS));
    const seeds = [1, 2, 3, 4, 5].map((s) => JSON.stringify(chaosSchedule(s, OPTS)));
    expect(new Set(seeds).size).toBe(5);
  });

  it('makes every kind of fault once in four, on servers and processes that exist', () => {
    for (let seed = 0; seed < 20; seed++) {
      const faults = chaosSchedule(seed, OPTS);
      expect(faults.map((f) => f.kind).sort()).toEqual([...FAULT_KINDS].sort());
      for (const f of faults) {
        if (f.kind === 'kill-worker') expect(f.slot).toBeLessThan(OPTS.processes[f.role]!);
        else expect(OPTS.servers).toContain(f.server);
      }
    }
  });

  it('draws every killed role and every server over a few seeds', () => {
    const roles = new Set<string>();
    const servers = new Set<string>();
    for (let seed = 0; seed < 40; seed++) {
      for (const f of chaosSchedule(seed, OPTS)) {
        if (f.kind === 'kill-worker') roles.add(`${f.role}/${f.slot}`);
        else servers.add(f.server);
      }
    }
    expect([...roles].sort()).toEqual(['adversary/0', 'executor/0', 'executor/1', 'judge/0', 'judge/1', 'solver/0']);
    expect([...servers].sort()).toEqual(['n1', 'n2', 'n3']);
  });

  it('keeps the spacing before, between and after the faults, at the tightest fit too', () => {
    const tight = { ...OPTS, faults: 5, spacing: 64 }; // 5 * 64 = 320 = total - tail
    for (const opts of [OPTS, tight, { ...OPTS, faults: 9, spacing: 10, tail: 0 }]) {
      for (let seed = 0; seed < 30; seed++) {
        const at = chaosSchedule(seed, opts).map((f) => f.at);
        expect(at).toHaveLength(opts.faults);
        expect(at[0]).toBeGreaterThanOrEqual(opts.spacing);
        for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(opts.spacing);
        expect(at.at(-1)).toBeLessThanOrEqual(opts.total - opts.tail);
      }
    }
    expect(chaosSchedule(3, tight).map((f) => f.at)).toEqual([64, 128, 192, 256, 320]);
  });

  it('kills no worker when no process may be killed', () => {
    const faults = chaosSchedule(1, { ...OPTS, processes: {} });
    expect(faults.map((f) => f.kind)).not.toContain('kill-worker');
    expect(new Set(faults.map((f) => f.kind)).size).toBe(3);
  });

  it('refuses bad arguments, saying which', () => {
    expect(() => chaosSchedule(-1, OPTS)).toThrow(/chaos schedule: seed -1: expected an integer/);
    expect(() => chaosSchedule(1.5, OPTS)).toThrow(/seed 1.5/);
    expect(() => chaosSchedule(1, { ...OPTS, total: 0 })).toThrow(/total 0: expected an integer of at least 1/);
    expect(() => chaosSchedule(1, { ...OPTS, faults: 0 })).toThrow(/faults 0/);
    expect(() => chaosSchedule(1, { ...OPTS, spacing: 2.5 })).toThrow(/spacing 2.5/);
    expect(() => chaosSchedule(1, { ...OPTS, tail: -3 })).toThrow(/tail -3: expected an integer of at least 0/);
    expect(() => chaosSchedule(1, { ...OPTS, servers: [] })).toThrow(/no servers to fault/);
    expect(() => chaosSchedule(1, { ...OPTS, processes: { learner: 1 } as ChaosOptions['processes'] })).toThrow(/unknown role "learner"/);
    expect(() => chaosSchedule(1, { ...OPTS, processes: { judge: -1 } })).toThrow(/processes.judge -1/);
    expect(() => chaosSchedule(1, { ...OPTS, faults: 6 })).toThrow(/6 faults 60 pairs apart need 360 pairs before the last 80; the run has 400/);
  });

  it('describes each fault in a few words', () => {
    expect(describeFault({ kind: 'kill-worker', at: 1, role: 'judge', slot: 1 })).toBe('SIGKILL judge/1');
    expect(describeFault({ kind: 'kill-server', at: 1, server: 'n2', downMs: 2500 })).toBe('SIGKILL n2, restart after 2.5 s');
    expect(describeFault({ kind: 'stop-server', at: 1, server: 'n1', forMs: 3000 })).toBe('SIGSTOP n1 for 3.0 s');
    expect(describeFault({ kind: 'partition', at: 1, server: 'n3', forMs: 10_000 })).toBe('partition n3 for 10 s');
  });
});
