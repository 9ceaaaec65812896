import type { Command } from 'commander';

export function registerReplay(program: Command): void {
  program.command('replay').description('(being built)').action(() => {
    throw new Error('crucible replay is not built yet');
  });
}
