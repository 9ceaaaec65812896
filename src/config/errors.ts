/** The config's error type, apart from the loader (yaml, the schemas) for the CLI's error
 * mapping. */

/** A config that cannot be used: says which file and which key, and why. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
