/**
 * What the machine must have for some tests, and what happens when it lacks it. On a bare clone
 * a test that needs something absent is skipped and its name says why; where `CRUCIBLE_REQUIRE`
 * names the capability (CI sets `datasets,bwrap,torch,netns,chromium`), the absence fails the
 * test file instead, so no skip goes unnoticed there.
 */

export const CAPABILITIES = ['datasets', 'bwrap', 'torch', 'netns', 'chromium'] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** The capabilities `CRUCIBLE_REQUIRE` names; an unknown name is an error, never ignored. */
export function requiredCapabilities(env: string | undefined = process.env.CRUCIBLE_REQUIRE): Set<Capability> {
  const out = new Set<Capability>();
  for (const raw of (env ?? '').split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    if (!(CAPABILITIES as readonly string[]).includes(name)) {
      throw new Error(`CRUCIBLE_REQUIRE: unknown capability "${name}" (known: ${CAPABILITIES.join(', ')})`);
    }
    out.add(name as Capability);
  }
  return out;
}

export class MissingCapabilityError extends Error {
  constructor(capability: Capability, why: string) {
    super(`CRUCIBLE_REQUIRE names ${capability}, but it is missing here: ${why}`);
    this.name = 'MissingCapabilityError';
  }
}

/**
 * `missing` is null when the capability is there, else why not. Returns it unchanged for a test
 * to skip on (`describe.skipIf(reason !== null)`), or throws when the capability is required.
 */
export function capability(name: Capability, missing: string | null, required = requiredCapabilities()): string | null {
  if (missing !== null && required.has(name)) throw new MissingCapabilityError(name, missing);
  return missing;
}
