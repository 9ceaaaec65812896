import { Command, CommanderError } from 'commander';

type Register = (program: Command) => void;

/** Each subcommand's module and the commands it registers. A command line loads only the module
 * of its command (their imports are most of the start-up time); help and unknown commands load
 * them all, `--version` none. */
const COMMANDS: ReadonlyArray<{ names: readonly string[]; load: () => Promise<Register> }> = [
  { names: ['run'], load: async () => (await import('./commands/run.js')).registerRun },
  { names: ['replay'], load: async () => (await import('./commands/replay.js')).registerReplay },
  { names: ['exec'], load: async () => (await import('./commands/exec.js')).registerExec },
  { names: ['bench'], load: async () => (await import('./commands/bench.js')).registerBench },
  { names: ['data'], load: async () => (await import('./commands/data.js')).registerData },
  { names: ['doctor'], load: async () => (await import('./commands/doctor.js')).registerDoctor },
  { names: ['runs', 'compare'], load: async () => (await import('./commands/runs.js')).registerRuns },
  { names: ['report'], load: async () => (await import('./commands/report.js')).registerReport },
  { names: ['export'], load: async () => (await import('./commands/export.js')).registerExport },
  { names: ['evolved'], load: async () => (await import('./commands/evolved.js')).registerEvolved },
  { names: ['nats'], load: async () => (await import('./commands/nats.js')).registerNats },
  { names: ['log'], load: async () => (await import('./commands/log.js')).registerLog },
  { names: ['ablate'], load: async () => (await import('./commands/ablate.js')).registerAblate },
  { names: ['worker', 'status'], load: async () => (await import('./commands/worker.js')).registerWorker },
];

/** The subcommand modules a command line (process.argv's shape) needs; all without one. */
export function commandModules(argv?: readonly string[]): ReadonlyArray<{ names: readonly string[]; load: () => Promise<Register> }> {
  const first = argv?.[2];
  if (first === '-V' || first === '--version') return [];
  const one = first === undefined ? undefined : COMMANDS.find((c) => c.names.includes(first));
  return one ? [one] : COMMANDS;
}

/** Builds the `crucible` command tree; each subcommand lives in its own module. Given the
 * command line, only what it runs is loaded. */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
  const program = new Command('crucible')
    .description('Adversarial co-evolution of code models and test models, on an event log')
    .version('0.1.0')
    .showHelpAfterError();
  for (const register of await Promise.all(commandModules(argv).map((c) => c.load()))) register(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = await buildProgram(argv);
  program.exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    // Loaded only here: the error types it tells apart come from every layer.
    const { userFacing } = await import('./errors.js');
    const known = userFacing(err);
    if (known) {
      process.stderr.write(`crucible: ${known.message}\n`);
      process.exitCode = known.exitCode;
      return;
    }
    throw err;
  }
}
