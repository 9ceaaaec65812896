import { describe, expect, it } from 'vitest';
import { capability, MissingCapabilityError, requiredCapabilities } from './require.js';

describe('CRUCIBLE_REQUIRE', () => {
  it('reads a comma-separated list and refuses an unknown name', () => {
    expect([...requiredCapabilities(' datasets, bwrap ,,torch')]).toEqual(['datasets', 'bwrap', 'torch']);
    expect(requiredCapabilities('').size).toBe(0);
    expect(() => requiredCapabilities('datasets,gpu')).toThrow(/unknown capability "gpu"/);
  });

  it('passes a missing capability through as a skip reason unless it is required', () => {
    expect(capability('torch', null, new Set(['torch']))).toBeNull();
    expect(capability('torch', 'no torch here', new Set())).toBe('no torch here');
    expect(() => capability('torch', 'no torch here', new Set(['torch']))).toThrow(MissingCapabilityError);
    expect(() => capability('netns', 'no namespaces', new Set(['netns']))).toThrow(/CRUCIBLE_REQUIRE names netns, but it is missing here: no namespaces/);
  });
});
