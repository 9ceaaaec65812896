import { Command, CommanderError } from 'commander';
import { registerRun } from './commands/run.js';
import { registerReplay } from './commands/replay.js';
import { registerExec } from './commands/exec.js';
import { registerBench } from './commands/bench.js';
import { registerData } from './commands/data.js';
import { registerDoctor } from './commands/doctor.js';
import { registerRuns } from './commands/runs.js';
import { registerReport } from './commands/report.js';
import { registerExport } from './commands/export.js';
import { registerEvolved } from './commands/evolved.js';
import { registerNats } from './commands/nats.js';
import { registerLog } from './commands/log.js';
import { registerAblate } from './commands/ablate.js';
import { registerWorker } from './commands/worker.js';
import { userFacing } from './errors.js';

/** Builds the `crucible` command tree; each subcommand lives in its own module. */
export function buildProgram(): Command {
  const program = new Command('crucible')
    .description('Adversarial co-evolution of code models and test models, on an event log')
    .version('0.1.0')
    .showHelpAfterError();
  registerRun(program);
  registerReplay(program);
  registerExec(program);
  registerBench(program);
  registerData(program);
  registerDoctor(program);
  registerRuns(program);
  registerReport(program);
  registerExport(program);
  registerEvolved(program);
  registerNats(program);
  registerLog(program);
  registerAblate(program);
  registerWorker(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  program.exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    const known = userFacing(err);
    if (known) {
      process.stderr.write(`crucible: ${known.message}\n`);
      process.exitCode = known.exitCode;
      return;
    }
    throw err;
  }
}
