import type { Command } from 'commander';

export function registerExec(program: Command): void {
  program.command('exec').description('(being built)').action(() => {
    throw new Error('crucible exec is not built yet');
  });
}
