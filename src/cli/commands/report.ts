import type { Command } from 'commander';
export function registerReport(_program: Command): void {}
