import type { Command } from 'commander';

export function registerRun(program: Command): void {
  program.command('run').description('(being built)').action(() => {
    throw new Error('crucible run is not built yet');
  });
}
