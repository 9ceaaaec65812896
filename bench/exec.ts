/**
 * `crucible bench exec [--seconds S] [--workers N]`: runs/s and p50/p99 latency of the sandbox's
 * fork-server against a spawn-a-fresh-python-per-run baseline measured in the same run, for a
 * trivial and a small real program, with and without bubblewrap; one test per request (latency
 * per test), and for the trivial program also 20 tests per request (the Executor's usual shape;
 * p50/p99 there are per request). Assert tests (ten per program, five calls each, each judged
 * by an oracle process beside one candidate process per test) are set against the release's way
 * of running them: one fresh process per program running the program and its asserts together,
 * spawned the same way (runs/s counts tests in both). All servers are started before the rows
 * (their start-up is printed apart), so each row is the steady state.
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { createSandbox, defaultWorkers, SERVER_PATH } from '../src/sandbox/index.js';
import { bwrapArgs, bwrapWorks, findBwrap } from '../src/sandbox/isolation.js';

const PYTHON = '/usr/bin/python3';
/** Tests per request in the batched row. */
const BATCH = 20;
const PROGRAMS = {
  trivial: { program: 'print(int(input()) + 1)\n', input: '41\n', output: '42' },
  small: {
    // A typical contest solution: parse, sort, prefix sums, answer queries.
    program:
      'import sys\nfrom itertools import accumulate\ndata = sys.stdin.read().split()\nn = int(data[0])\na = sorted(map(int, data[1:n + 1]))\npre = [0] + list(accumulate(a))\nq = int(data[n + 1])\nout = []\nfor i in range(q):\n    k = int(data[n + 2 + i])\n    out.append(pre[k])\nprint("\\n".join(map(str, out)))\n',
    input: `2000\n${Array.from({ length: 2000 }, (_, i) => (i * 7919) % 10007).join(' ')}\n200\n${Array.from({ length: 200 }, (_, i) => i * 10).join('\n')}\n`,
    output: null as string | null,
  },
};

/** Ten assert tests of five calls each. */
const ASSERTS = {
  program: 'def add(a, b):\n    return a + b\n',
  entryPoint: 'add',
  tests: Array.from({ length: 10 }, (_, k) => ({
    style: 'assert' as const,
    code: Array.from({ length: 5 }, (_, j) => `assert add(${k}, ${j}) == ${k + j}`).join('\n'),
  })),
};

interface Figures {
  runs: number;
  seconds: number;
  p50: number;
  p99: number;
}

/** `perCall`: runs each call makes (a request of several tests); latency stays per call. */
async function measure(seconds: number, concurrency: number, once: () => Promise<void>, perCall = 1): Promise<Figures> {
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const s = performance.now();
        await once();
        lat.push(performance.now() - s);
      }
    }),
  );
  const took = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  return { runs: lat.length * perCall, seconds: took, p50: q(0.5), p99: q(0.99) };
}

function spawnOnce(cmd: string, args: string[], input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'ignore'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 && out.length > 0 ? resolve() : reject(new Error(`baseline run failed (${code})`))));
    p.stdin.end(input);
  });
}

export async function runBench(args: string[]): Promise<void> {
  const i = args.indexOf('--seconds');
  const seconds = i >= 0 ? Number(args[i + 1]) : 2;
  if (!Number.isFinite(seconds) || seconds <= 0) throw new Error('--seconds must be a positive number');
  const wi = args.indexOf('--workers');
  const workers = wi >= 0 ? Math.max(1, Number(args[wi + 1])) : defaultWorkers();
  const bwrap = findBwrap();
  const bwrapOk = bwrap !== undefined && bwrapWorks(bwrap, PYTHON, SERVER_PATH).ok;
  const rows: Array<{ name: string; f: Figures }> = [];
  const startups: string[] = [];
  const modes: Array<'none' | 'bwrap'> = bwrapOk ? ['none', 'bwrap'] : ['none'];
  for (const mode of modes) {
    const sandbox = await createSandbox({ workers, isolation: mode, warn: () => undefined });
    // Every server started before any row is measured (they start on first use): the rows are
    // the steady state a run spends its time in; the start-up is printed on its own.
    const warm = { program: PROGRAMS.trivial.program, tests: [{ style: 'stdio' as const, input: PROGRAMS.trivial.input, output: PROGRAMS.trivial.output }] };
    const s0 = performance.now();
    await Promise.all(Array.from({ length: workers * 2 }, () => sandbox.run(warm)));
    startups.push(`${mode === 'bwrap' ? 'bwrap' : 'rlimits'}: ${workers} servers started and answering in ${(performance.now() - s0).toFixed(0)} ms`);
    for (const [name, p] of Object.entries(PROGRAMS)) {
      const req = { program: p.program, tests: [{ style: 'stdio' as const, input: p.input, output: p.output }] };
      const check = await sandbox.run(req);
      if (check[0]!.verdict !== 'accepted') throw new Error(`${name} did not pass in the sandbox: ${JSON.stringify(check[0])}`);
      rows.push({
        name: `fork-server ${mode === 'bwrap' ? 'bwrap' : 'rlimits'} ${name}`,
        f: await measure(seconds, workers * 2, async () => {
          const r = await sandbox.run(req);
          if (r[0]!.verdict !== 'accepted') throw new Error(`bench run failed: ${r[0]!.verdict}`);
        }),
      });
      if (name === 'trivial') {
        // The usual shape of work: one program on many tests, sent to each server in one request.
        const many = { ...req, tests: Array.from({ length: BATCH }, () => req.tests[0]!) };
        rows.push({
          name: `fork-server ${mode === 'bwrap' ? 'bwrap' : 'rlimits'} ${name} x${BATCH}`,
          f: await measure(
            seconds,
            workers,
            async () => {
              const r = await sandbox.run(many);
              if (r.some((x) => x.verdict !== 'accepted')) throw new Error('bench run failed');
            },
            BATCH,
          ),
        });
      }
      const base = mode === 'bwrap' ? ([bwrap!, [...bwrapArgs(PYTHON, SERVER_PATH), PYTHON]] as const) : ([PYTHON, []] as const);
      if (name === 'trivial') {
        // Assert tests as HumanEval/MBPP/EvolveCoder carry them, five calls of the program each.
        rows.push({
          name: `fork-server ${mode === 'bwrap' ? 'bwrap' : 'rlimits'} assert x${ASSERTS.tests.length}`,
          f: await measure(
            seconds,
            workers,
            async () => {
              const r = await sandbox.run(ASSERTS);
              if (r.some((x) => x.verdict !== 'accepted')) throw new Error(`bench assert run failed: ${JSON.stringify(r)}`);
            },
            ASSERTS.tests.length,
          ),
        });
        const inProcess = `${ASSERTS.program}\n${ASSERTS.tests.map((t) => t.code).join('\n')}\nprint("ok")\n`;
        rows.push({
          name: `in-process ${mode === 'bwrap' ? 'bwrap' : 'plain'} assert x${ASSERTS.tests.length}`,
          f: await measure(seconds, workers, () => spawnOnce(base[0], [...base[1], '-I', '-S', '-c', inProcess], ''), ASSERTS.tests.length),
        });
      }
      rows.push({
        name: `spawn      ${mode === 'bwrap' ? 'bwrap' : 'plain'}   ${name}`,
        f: await measure(seconds, workers, () => spawnOnce(base[0], [...base[1], '-I', '-S', '-c', p.program], p.input)),
      });
    }
    await sandbox.close();
  }
  process.stdout.write(`exec bench: ${workers} workers, ${seconds}s per row, ${os.cpus().length} cores\n`);
  for (const line of startups) process.stdout.write(`start-up, ${line}\n`);
  process.stdout.write('config                                   runs/s    p50 ms   p99 ms\n');
  for (const { name, f } of rows) {
    process.stdout.write(`${name.padEnd(40)} ${(f.runs / f.seconds).toFixed(0).padStart(7)} ${f.p50.toFixed(2).padStart(9)} ${f.p99.toFixed(2).padStart(8)}\n`);
  }
  for (const mode of modes) {
    for (const name of Object.keys(PROGRAMS)) {
      const fs = rows.find((r) => r.name.startsWith('fork-server') && r.name.includes(mode === 'bwrap' ? 'bwrap' : 'rlimits') && r.name.endsWith(name))!;
      const sp = rows.find((r) => r.name.startsWith('spawn') && r.name.includes(mode === 'bwrap' ? 'bwrap' : 'plain') && r.name.endsWith(name))!;
      const x = fs.f.runs / fs.f.seconds / (sp.f.runs / sp.f.seconds);
      process.stdout.write(`speed-up ${mode === 'bwrap' ? 'bwrap  ' : 'rlimits'} ${name}: ${x.toFixed(1)}x\n`);
      const batched = rows.find((r) => r.name === `${fs.name} x${BATCH}`);
      if (batched) {
        const xb = batched.f.runs / batched.f.seconds / (sp.f.runs / sp.f.seconds);
        process.stdout.write(`speed-up ${mode === 'bwrap' ? 'bwrap  ' : 'rlimits'} ${name} x${BATCH}: ${xb.toFixed(1)}x\n`);
      }
      const ours = rows.find((r) => r.name === `fork-server ${mode === 'bwrap' ? 'bwrap' : 'rlimits'} assert x${ASSERTS.tests.length}`);
      const theirs = rows.find((r) => r.name === `in-process ${mode === 'bwrap' ? 'bwrap' : 'plain'} assert x${ASSERTS.tests.length}`);
      if (name === 'trivial' && ours && theirs) {
        const xa = ours.f.runs / ours.f.seconds / (theirs.f.runs / theirs.f.seconds);
        process.stdout.write(
          `assert tests, judged outside against run in-process (the release's way), ${mode === 'bwrap' ? 'bwrap  ' : 'rlimits'}: ${xa.toFixed(2)}x\n`,
        );
      }
    }
  }
}
