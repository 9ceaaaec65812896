/** Command-line flags shared by the benchmarks. */

/** `--name N`: a positive integer, or `fallback` when the flag is absent. */
export function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} needs a positive integer`);
  return n;
}
