import { spawnSync } from 'node:child_process';
import type { Command } from 'commander';
import { installCommand, systemChecks, type Check } from '../system.js';
import { UserError } from '../errors.js';
import { isolationReport } from '../../sandbox/isolation.js';

function table(checks: readonly Check[]): string {
  const w = Math.max(...checks.map((c) => c.name.length));
  return checks
    .map((c) => `${c.ok ? 'ok     ' : 'MISSING'}  ${c.name.padEnd(w)}  ${c.detail}${c.ok ? '' : `  -> apt-get install ${c.debian}  (${c.usedBy})`}`)
    .join('\n');
}

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description('list the system pieces crucible uses (python, numpy, torch, bubblewrap, nats-server) and how to get what is missing')
    .option('--install', 'install the missing Debian packages the tests need (as root, with apt-get); otherwise print the command and exit 1')
    .option(
      '--for-run',
      "with --install: only what `crucible run` needs (python3, bubblewrap); never fails, prints the command when it cannot install (npm's postinstall)",
    )
    .option('--json', 'print the checks as JSON')
    .action((opts: { install?: boolean; forRun?: boolean; json?: boolean }) => {
      let checks = systemChecks();
      if (opts.install) {
        const cmd = installCommand(checks, opts.forRun ? 'run' : 'tests');
        if (cmd) {
          const root = typeof process.getuid === 'function' && process.getuid() === 0;
          const apt = spawnSync('sh', ['-c', 'command -v apt-get'], { encoding: 'utf8' }).status === 0;
          if (!root || !apt) {
            const hint = `missing system packages for ${opts.forRun ? '`crucible run`' : 'the tests'}; run as root:\n  apt-get update && ${cmd.join(' ')}`;
            if (opts.forRun) {
              process.stderr.write(`crucible doctor: ${hint}\n`);
              return;
            }
            throw new UserError(hint, 1);
          }
          process.stderr.write(`crucible doctor: installing ${cmd.slice(4).join(' ')}\n`);
          const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
          const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
          const install = update.status === 0 ? spawnSync(cmd[0]!, [...cmd.slice(1), '-qq'], { stdio: 'inherit', env }) : update;
          if (install.status !== 0) {
            const msg = `apt-get failed (exit ${install.status}); run it by hand: apt-get update && ${cmd.join(' ')}`;
            if (opts.forRun) {
              process.stderr.write(`crucible doctor: ${msg}\n`);
              return;
            }
            throw new UserError(msg, 1);
          }
          checks = systemChecks();
        }
      }
      if (opts.json) process.stdout.write(`${JSON.stringify({ checks, isolation: isolationReport() })}\n`);
      else if (!opts.install) {
        process.stdout.write(`${table(checks)}\n\nsandbox isolation layers (a run refuses unisolated verdicts unless executor.isolation is none):\n`);
        for (const [layer, status] of Object.entries(isolationReport())) {
          if (typeof status === 'object' && status !== null && 'ok' in status) {
            const st = status as { ok: boolean; reason?: string };
            process.stdout.write(`${st.ok ? 'ok     ' : 'NO     '}  ${layer.padEnd(8)}  ${st.reason ?? ''}\n`);
          }
        }
      }
      if (opts.install && opts.forRun) return;
      const missing = checks.filter((c) => !c.ok && c.forTests);
      if (opts.install && missing.length > 0) throw new UserError(`still missing after install:\n${table(missing)}`, 1);
      if (!opts.install && missing.length > 0) process.exitCode = 1;
    });
}
