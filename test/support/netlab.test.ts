/**
 * The network lab the scale-out tests run on: a nats-server on one namespace host answers a
 * client on another over the veth network, and stops answering while that host is cut off.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { NetLab } from './netlab.js';
import { capability } from './require.js';

const lab = NetLab.available();
capability('netns', lab.ok ? null : (lab.reason ?? 'network namespaces cannot be made here'));

/** Connects from `host` to addr:port and returns the server's first line (or the error). */
function firstLine(l: NetLab, host: string, addr: string, port: number): string {
  const script = `const s=require('net').connect(${port},'${addr}');s.setTimeout(1500,()=>{console.log('timeout');process.exit(0)});s.on('data',d=>{console.log(String(d).split('\\r\\n')[0]);process.exit(0)});s.on('error',e=>{console.log('error '+e.code);process.exit(0)});`;
  const r = spawnSync('ip', ['netns', 'exec', l.host(host).ns, process.execPath, '-e', script], { encoding: 'utf8', timeout: 10_000 });
  return r.stdout.trim();
}

describe.skipIf(!lab.ok)(`network lab (namespaces: ${lab.ok ? 'available' : lab.reason})`, () => {
  const l = lab.ok ? new NetLab(`t${process.pid % 1000}`) : null;
  afterAll(() => l?.destroy());

  it('joins hosts on their own addresses, and a cut link partitions a host', async () => {
    const a = l!.addHost('a');
    l!.addHost('b');
    const server = l!.spawn('a', 'nats-server', ['-a', a.address, '-p', '4222'], { stdio: 'ignore' });
    let line = '';
    for (let i = 0; i < 50 && !line.startsWith('INFO'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      line = firstLine(l!, 'b', a.address, 4222);
    }
    expect(line).toMatch(/^INFO \{/);
    l!.setLink('b', false);
    expect(firstLine(l!, 'b', a.address, 4222)).toMatch(/^(timeout|error)/);
    l!.setLink('b', true);
    expect(firstLine(l!, 'b', a.address, 4222)).toMatch(/^INFO \{/);
    server.kill('SIGKILL');
  }, 30_000);
});
