/** The ablation layer's errors; src/cli/errors.ts maps them to exit codes. */

/** A variant the recorded log cannot answer (or a malformed one): names the setting and why. */
export class VariantRefusedError extends Error {
  constructor(
    readonly variant: string,
    readonly setting: string | null,
    readonly reason: string,
  ) {
    super(`variant ${variant}: ${setting === null ? '' : `${setting}: `}${reason}`);
    this.name = 'VariantRefusedError';
  }
}

/** The log itself cannot be re-judged (not a run, a method whose judgement is not re-derivable). */
export class AblationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AblationError';
  }
}
