import type { Command } from 'commander';

export function registerData(program: Command): void {
  program.command('data').description('(being built)').action(() => {
    throw new Error('crucible data is not built yet');
  });
}
