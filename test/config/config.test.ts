import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, applyOverrides, loadConfigFile, parseConfig } from '../../src/config/load.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}

describe('run configs', () => {
  it('loads the shipped demo config with every default filled in', () => {
    const c = loadConfigFile('configs/demo.yaml');
    expect(c.name).toBe('demo');
    expect(c.sampling.groupSize).toBe(8);
    expect(c.log).toEqual({ backend: 'sqlite', synchronous: 'full' });
    expect(c.mistakeBook.enabled).toBe(true);
  });

  it('names an unknown key with its full path', () => {
    const p = file('typo.yaml', 'sampling:\n  groupSise: 4\n');
    expect(() => loadConfigFile(p)).toThrow(ConfigError);
    expect(() => loadConfigFile(p)).toThrow(/unknown key "sampling\.groupSise"/);
  });

  it('names a key of the wrong type', () => {
    expect(() => parseConfig({ rounds: 'many' }, 'x.yaml')).toThrow(/x\.yaml: rounds: .*number/);
    expect(() => parseConfig({ rewards: { alpha: 2 } }, 'x.yaml')).toThrow(/rewards\.alpha/);
    // Held-out samples: a positive count, or left out (none beyond the G).
    expect(() => parseConfig({ sampling: { heldOutSamples: 0 } }, 'x.yaml')).toThrow(/x\.yaml: sampling\.heldOutSamples: /);
    expect(() => parseConfig({ sampling: { heldOutSamples: 2.5 } }, 'x.yaml')).toThrow(/sampling\.heldOutSamples/);
    expect(parseConfig({ sampling: { heldOutSamples: 24 } }, 'x.yaml').sampling.heldOutSamples).toBe(24);
  });

  it('reports YAML syntax errors with the line', () => {
    const p = file('broken.yaml', 'name: demo\nsampling: [unclosed\n');
    expect(() => loadConfigFile(p)).toThrow(/not valid YAML at line \d/);
  });

  it('rejects a file whose top level is not a mapping', () => {
    expect(() => loadConfigFile(file('list.yaml', '- 1\n- 2\n'))).toThrow(/top level must be a mapping/);
  });

  it('applies --set overrides as YAML scalars and --seed', () => {
    const c = loadConfigFile('configs/demo.yaml', { overrides: ['sampling.groupSize=4', 'mistakeBook.enabled=false', 'rewards.alpha=0.25'], seed: 11 });
    expect(c.sampling.groupSize).toBe(4);
    expect(c.mistakeBook.enabled).toBe(false);
    expect(c.rewards.alpha).toBe(0.25);
    expect(c.seed).toBe(11);
  });

  it('refuses malformed overrides and overrides through a non-section', () => {
    expect(() => applyOverrides({}, ['novalue'])).toThrow(/expected key=value/);
    expect(() => applyOverrides({ rounds: 3 }, ['rounds.x=1'])).toThrow(/"rounds" is not a section/);
    expect(() => loadConfigFile('configs/demo.yaml', { overrides: ['sampling.nope=1'] })).toThrow(/unknown key "sampling\.nope"/);
  });
});

describe("CURE's released switches as config keys", () => {
  it("configs/cure.yaml states the release's defaults, recorded in the run's config", () => {
    const c = loadConfigFile('configs/cure.yaml');
    expect(c.cure).toEqual({ postStage: false, enableEfficient: false, lengthRegularize: null, maxLenThreshold: 8000, minLenThreshold: 1000 });
    expect(loadConfigFile('configs/demo.yaml').cure).toEqual(c.cure);
  });

  it('length regularization needs response lengths in tokens: refused for the catalog policy', () => {
    expect(() => loadConfigFile('configs/cure.yaml', { overrides: ['cure.enableEfficient=true'] })).toThrow(
      /cure\.enableEfficient.*response lengths in tokens/s,
    );
    expect(() => loadConfigFile('configs/cure.yaml', { overrides: ['cure.lengthRegularize=true'] })).toThrow(/cure\.lengthRegularize/);
    // post_stage changes only the test rewards: any policy.
    expect(loadConfigFile('configs/cure.yaml', { overrides: ['cure.postStage=true'] }).cure.postStage).toBe(true);
    expect(() => loadConfigFile('configs/cure.yaml', { overrides: ['cure.nope=1'] })).toThrow(/unknown key "cure\.nope"/);
  });
});
