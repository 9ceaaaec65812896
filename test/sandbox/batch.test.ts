/** `crucible exec --batch` as a user runs it (the real command in a child process): many
 * programs through one shared pool, with attacks across programs in the same batch. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const dir = mkdtempSync(path.join(os.tmpdir(), 'crucible-batch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function crucible(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['bin/crucible.js', ...args], { maxBuffer: 1 << 24 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const SECRET = 'QZXWBATCHSECRET42';
// The scanner maps letters by rot13 and digits by rot5 so that its own needle never matches.
const rot = (s: string) =>
  s.replace(/[A-Z]/g, (c) => String.fromCharCode(((c.charCodeAt(0) - 65 + 13) % 26) + 65)).replace(/[0-9]/g, (c) => String((Number(c) + 5) % 10));
const SCANNER = [
  'import ctypes; ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)',
  'table = bytearray(range(256))',
  'for i in range(26): table[65 + i] = 65 + (i + 13) % 26',
  'for i in range(10): table[48 + i] = 48 + (i + 5) % 10',
  'table = bytes(table)',
  `needle = ${JSON.stringify(rot(SECRET))}.encode()`,
  'hits = 0',
  'mem = open("/proc/self/mem", "rb", 0)',
  'for line in open("/proc/self/maps").read().splitlines():',
  '    p = line.split()',
  '    if p[1][0] != "r" or (len(p) > 5 and p[5] in ("[vvar]", "[vsyscall]")): continue',
  '    a, b = (int(x, 16) for x in p[0].split("-"))',
  '    try:',
  '        mem.seek(a); hits += mem.read(b - a).translate(table).count(needle)',
  '    except (OSError, ValueError, OverflowError):',
  '        pass',
  'print("hits", hits)',
].join('\n');

const RUNS = [
  // Holds a secret in its source, input and output.
  { id: 'holder', program: `print("${SECRET}", input())`, tests: [{ input: SECRET, output: `${SECRET} ${SECRET}` }] },
  // Forges a setup failure on the result channel, then leaves state behind.
  {
    id: 'forger',
    program: 'import os\nopen("left", "w").write("x")\nos.write(9, b\'{"s":"setup","message":"x"}\')\nos._exit(0)\ndef f(x):\n    return x\n',
    fn: 'f',
    tests: [{ args: [1], expected: 1 }],
  },
  { id: 'scanner', programFile: 'scanner.py', tests: [{ input: '', output: 'hits 0' }], limits: { memoryLimit: 512, timeLimit: 5 } },
  // 36 calls of 16 MiB each, and call tests of 16 MiB: the program's output_limit, never the batch's end.
  {
    id: 'huge',
    style: 'assert',
    program: 'def f():\n    return "x" * (16 << 20)\n',
    fn: 'f',
    tests: [{ assert: 'for _ in range(36):\n    assert len(f()) == 16 << 20' }],
  },
  { id: 'hugecall', program: 'def f():\n    return "x" * (16 << 20)\n', fn: 'f', tests: [{ args: [] }, { args: [] }] },
  // A correct program queued behind the attackers: a clean directory and the right verdicts.
  {
    id: 'correct',
    program: 'import os\nprint(sorted(os.listdir(".")), int(input()) * 2)',
    tests: [
      { input: '2', output: '[] 4' },
      { input: '5', output: '[] 10' },
    ],
  },
  {
    id: 'asserts',
    style: 'assert',
    program: 'def add(a, b):\n    return a + b\n',
    fn: 'add',
    tests: [{ assert: 'assert add(2, 3) == 5' }, { assert: 'def check(candidate):\n    assert candidate(1, 1) == 3\n' }],
  },
];

describe.each(['auto', 'none'] as const)('crucible exec --batch (isolation %s)', (isolation) => {
  it('runs every line through one pool and prints one line per test with its run id', async () => {
    writeFileSync(path.join(dir, 'scanner.py'), SCANNER);
    const file = path.join(dir, 'runs.jsonl');
    writeFileSync(file, RUNS.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const out = await crucible(['exec', '--batch', file, '--workers', '1', '--isolation', isolation]);
    const lines = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { run: string; test: number; verdict: string; exception_type?: string });
    expect(
      lines.map((l) => [l.run, l.test, l.verdict]),
      out.stderr,
    ).toEqual([
      ['holder', 0, 'accepted'],
      ['forger', 0, 'runtime_error'],
      ['scanner', 0, 'accepted'],
      ['huge', 0, 'output_limit'],
      ['hugecall', 0, 'output_limit'],
      ['hugecall', 1, 'output_limit'],
      ['correct', 0, 'accepted'],
      ['correct', 1, 'accepted'],
      ['asserts', 0, 'accepted'],
      ['asserts', 1, 'wrong_answer'],
    ]);
    expect(lines[1]!.exception_type).toBe('MalformedResult');
    expect(out.code).toBe(1);
  }, 120_000);

  it('refuses a bad line with its file, line and field before running anything', async () => {
    const file = path.join(dir, 'bad.jsonl');
    writeFileSync(file, `${JSON.stringify(RUNS.find((r) => r.id === 'correct'))}\n{"id": "x", "program": "print(1)", "tests": [{"input": 1}]}\n`);
    const out = await crucible(['exec', '--batch', file, '--isolation', isolation]);
    expect(out.code).toBe(2);
    expect(out.stdout).toBe('');
    expect(out.stderr).toMatch(/bad\.jsonl:2: tests\.0: stdio test: input/);
  }, 60_000);
});
