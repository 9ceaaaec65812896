/**
 * How `crucible` loads its subcommands (src/cli/main.ts): a command line loads only its
 * command's module, and the table that says which module registers which command is right.
 */
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { commandModules } from '../../src/cli/main.js';
import { runMain } from '../support/cli.js';

const argv = (...args: string[]) => ['node', 'crucible', ...args];

describe('subcommand modules', () => {
  it('each module registers exactly the commands the table names for it', async () => {
    const all = commandModules();
    expect(all.length).toBeGreaterThan(10);
    for (const entry of all) {
      const program = new Command('crucible');
      (await entry.load())(program);
      expect(program.commands.map((c) => c.name())).toEqual(entry.names);
    }
  });

  it('a command line loads its command only; --version none; help and unknown commands all', () => {
    const names = (args: string[]) => commandModules(argv(...args)).map((c) => c.names.join(' '));
    expect(names(['runs', 'runs/'])).toEqual(['runs compare']);
    expect(names(['compare', 'a', 'b'])).toEqual(['runs compare']);
    expect(names(['status', '--log', 'nats://x'])).toEqual(['worker status']);
    expect(names(['--version'])).toEqual([]);
    expect(names(['-V'])).toEqual([]);
    const all = commandModules().length;
    for (const args of [[], ['--help'], ['help', 'run'], ['nonsense']]) expect(commandModules(argv(...args)), args.join(' ')).toHaveLength(all);
  });

  it('--help lists every command, and an unknown command is refused with a suggestion', async () => {
    const help = await runMain(['--help']);
    expect(help.code).toBe(0);
    for (const entry of commandModules()) for (const name of entry.names) expect(help.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    const unknown = await runMain(['rnus']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("error: unknown command 'rnus'");
    expect(unknown.stderr).toContain('(Did you mean runs?)');
  });
});
