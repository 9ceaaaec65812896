/** Command-line flags shared by the benchmarks. */

/** `--name N`: a positive integer, or `fallback` when the flag is absent. */
export function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} needs a positive integer`);
  return n;
}

/** `--name 1,2,4`: positive integers, or `fallback` when the flag is absent. */
export function listFlag(args: string[], name: string, fallback: number[]): number[] {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const text = args[i + 1] ?? '';
  const xs = text.split(',').map(Number);
  if (text === '' || xs.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error(`--${name} needs positive integers separated by commas, got "${text}"`);
  return xs;
}
