/**
 * Attacks on the sandbox's judgement (a forged pass, a failure turned into sandbox_error, a
 * leak of an earlier run) by class, each with bubblewrap and without. After every attack the
 * next program, and a correct program queued behind the attacker on the same fork-server, must
 * get a clean sandbox and the right verdict.
 */
import { existsSync, readdirSync } from 'node:fs';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type Sandbox, type TestResult } from '../../src/sandbox/index.js';
import type { RunRequest } from '../../src/sandbox/api.js';
import type { TestCase } from '../../src/core/problem.js';

const stdio = (input: string, output: string | null): TestCase => ({ style: 'stdio', input, output });
const call = (args: unknown[], expected?: unknown): TestCase => (expected === undefined ? { style: 'call', args } : { style: 'call', args, expected });
const limits = { timeSeconds: 2, memoryMb: 96, wallSeconds: 4, outputBytes: 1 << 20 };
/** ctypes syscall(nr, ...) -> "refused" or "allowed", for the filter's cases. */
const sys = (nr: number, args = '0, 0, 0, 0') =>
  `import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\nr = libc.syscall(${nr}, ${args})\nprint("refused" if r < 0 and ctypes.get_errno() in (1, 38) else "allowed %d %d" % (r, ctypes.get_errno()))\n`;

interface Attack {
  cls: string;
  name: string;
  req: RunRequest;
  verdicts: TestResult['verdict'][];
  check?: (r: TestResult[], sandbox: Sandbox) => void;
}

const FORGE = (rec: string) => `import os\nos.write(9, ${JSON.stringify(rec)}.encode())\nos._exit(0)\ndef f(x):\n    return x\n`;

/** f(x, v) writes a reply of value v to call 1 on the channel itself, runs `then`, returns 0. */
const forgeReply = (then: string) =>
  `import os, json, time\ndef f(x, v):\n    body = json.dumps(["ret", 1, [], v]).encode()\n    os.write(7, len(body).to_bytes(4, "big") + body)\n${then}    return 0\n`;

const attacks: Attack[] = [
  // 1. The verdict channel
  {
    cls: '1 verdict channel',
    name: 'forges a setup failure (sandbox_error would void the penalty)',
    verdicts: ['runtime_error'],
    req: { program: FORGE('{"s":"setup","message":"forged"}'), entryPoint: 'f', tests: [call([1], 1)] },
    check: (r) => expect(r[0]!.exceptionType).toBe('MalformedResult'),
  },
  {
    cls: '1 verdict channel',
    name: 'forges a NaN value',
    verdicts: ['runtime_error'],
    req: { program: FORGE('L\n{"s":"value","value":NaN}'), entryPoint: 'f', tests: [call([1], 1)] },
  },
  {
    cls: '1 verdict channel',
    name: 'forges an overflowing number (an unsendable infinity)',
    verdicts: ['runtime_error'],
    req: { program: FORGE('L\n{"s":"value","value":[1e999]}'), entryPoint: 'f', tests: [call([1], 1)] },
    check: (r) => expect(r[0]!.exceptionType).toBe('MalformedResult'),
  },
  {
    cls: '1 verdict channel',
    name: 'forges an unknown tag and a huge plain integer',
    verdicts: ['runtime_error', 'runtime_error'],
    req: {
      program: 'import os, sys\ndef f(x):\n    os.write(9, (\'L\\n{"s":"value","value":%s}\' % x).encode())\n    os._exit(0)\n',
      entryPoint: 'f',
      tests: [call(['{"$weird": 1}'], 1), call(['123456789012345678901234567890'], 1)],
    },
  },
  {
    cls: '1 verdict channel',
    name: 'forges a passing assert record at module load',
    verdicts: ['runtime_error', 'runtime_error'],
    req: {
      program: FORGE('{"s":"ok"}'),
      entryPoint: 'f',
      tests: [
        { style: 'assert', code: 'assert f(1) == 2' },
        { style: 'assert', code: 'def check(candidate):\n    assert candidate(1) == 2\n' },
      ],
    },
  },
  {
    cls: '1 verdict channel',
    name: 'writes to the setup channel',
    verdicts: ['runtime_error'],
    req: { program: 'import os\nos.write(10, b"forged setup failure")\n', tests: [stdio('', '')] },
    check: (r) => expect(r[0]!.exceptionType).toBe('OSError'),
  },
  {
    cls: '1 verdict channel',
    name: 'floods the result fd with deeply nested garbage',
    verdicts: ['runtime_error'],
    req: { program: 'import os\nos.write(9, b"L\\n" + b"[" * 500000)\nos._exit(0)\ndef f(x):\n    return x\n', entryPoint: 'f', tests: [call([1], 1)] },
  },
  // 2. Assert tests judged outside the candidate
  {
    cls: '2 asserts outside',
    name: 'lying comparisons, containment, arithmetic and chained comparisons',
    verdicts: ['wrong_answer', 'wrong_answer', 'wrong_answer', 'runtime_error', 'wrong_answer'],
    req: {
      program:
        'class L(list):\n    def __lt__(s, o): return True\n    def __gt__(s, o): return True\n    def __ne__(s, o): return False\n    def __eq__(s, o): return True\n    def __contains__(s, x): return True\n    def __sub__(s, o): return 0\n    def __len__(s): return 3\ndef f(x):\n    return L()\n',
      tests: [
        { style: 'assert', code: 'assert f(1) > [0]' },
        { style: 'assert', code: 'assert not (f(1) != [9, 9])' },
        { style: 'assert', code: 'assert 7 in f(1)' },
        { style: 'assert', code: 'assert f(1) - [1] == 0' },
        { style: 'assert', code: 'assert [0] < f(1) < [1]' },
      ],
    },
    // Judged on the real value (an empty list): `-` of lists is a TypeError, not a pass.
    check: (r) => expect(r[3]!.exceptionType).toBe('TypeError'),
  },
  {
    cls: '2 asserts outside',
    name: 'defines its own check and replaces AssertionError',
    verdicts: ['wrong_answer'],
    req: {
      program: 'import builtins\ndef check(candidate):\n    pass\nbuiltins.AssertionError = type("E", (Exception,), {})\ndef f(x):\n    return 0\n',
      entryPoint: 'f',
      tests: [{ style: 'assert', code: 'def check(candidate):\n    assert candidate(1) == 5\n' }],
    },
  },
  {
    cls: '2 asserts outside',
    name: 'inspects its caller to find the expected value',
    verdicts: ['wrong_answer'],
    req: {
      program:
        'import sys\ndef f(x):\n    fr = sys._getframe(1)\n    while fr:\n        for v in fr.f_locals.values():\n            if isinstance(v, int) and v > 100: return v\n        fr = fr.f_back\n    return 0\n',
      tests: [{ style: 'assert', code: 'expected = 4711\nassert f(1) == expected' }],
    },
  },
  // 4. Cross-run state outside the heap
  {
    cls: '4 cross-run state',
    name: 'SysV shared memory segment',
    verdicts: ['accepted'],
    req: { program: sys(29, '4711, 4096, 0o1666, 0'), tests: [stdio('', 'refused')] },
  },
  {
    cls: '4 cross-run state',
    name: 'POSIX message queue',
    verdicts: ['accepted'],
    req: { program: sys(240, 'b"/q", 0o100 | 2, 0o666, 0'), tests: [stdio('', 'refused')] },
  },
  {
    cls: '4 cross-run state',
    name: 'kernel key (add_key, keyctl)',
    verdicts: ['accepted', 'accepted'],
    req: {
      program:
        'import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\nnr = int(input())\nr = libc.syscall(nr, b"user", b"k", b"secret", 6, -3) if nr == 248 else libc.syscall(nr, 0, -3, 0, 0)\nprint("refused" if r < 0 and ctypes.get_errno() in (1, 38) else "allowed")\n',
      tests: [stdio('248', 'refused'), stdio('250', 'refused')],
    },
  },
  {
    cls: '4 cross-run state',
    name: '12,000-deep directory tree in its run directory and in /tmp',
    verdicts: ['accepted'],
    req: {
      program:
        'import os\nfor base in (".", "/tmp"):\n    try:\n        os.chdir(base)\n        os.mkdir("crucible-attack-deep")\n        os.chdir("crucible-attack-deep")\n    except OSError:\n        continue\n    for i in range(12000):\n        os.mkdir("d")\n        os.chdir("d")\nprint("deep")\n',
      tests: [stdio('', 'deep')],
    },
    check: () => expect(existsSync('/tmp/crucible-attack-deep')).toBe(false),
  },
  // 5. Memory beyond the limit
  {
    cls: '5 memory',
    name: 'memfds past the limit',
    verdicts: ['memory_limit'],
    req: {
      program:
        'import os\nfds = []\nfor i in range(40):\n    fd = os.memfd_create("x%d" % i)\n    for j in range(8):\n        os.write(fd, b"x" * (1 << 20))\n    fds.append(fd)\nprint("held", len(fds) * 8, "MiB")\n',
      tests: [stdio('', null)],
      limits: { outputBytes: 16 << 20 },
    },
  },
  {
    cls: '5 memory',
    name: 'tmpfs files past the limit',
    verdicts: ['memory_limit'],
    req: {
      program:
        'import os\nfor i in range(40):\n    with open("f%d" % i, "wb") as f:\n        for j in range(8):\n            f.write(b"x" * (1 << 20))\nprint("held")\n',
      tests: [stdio('', null)],
      limits: { outputBytes: 16 << 20 },
    },
  },
  // 6. The syscall filter and the network
  { cls: '6 syscalls', name: 'io_uring', verdicts: ['accepted'], req: { program: sys(425, '8, 0, 0, 0'), tests: [stdio('', 'refused')] } },
  {
    cls: '6 syscalls',
    name: 'userfaultfd, unshare, ptrace, setns',
    verdicts: ['accepted', 'accepted', 'accepted', 'accepted'],
    req: {
      program:
        'import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\nnr = int(input())\nr = libc.syscall(nr, 0x40000000 if nr == 272 else 0, 0, 0, 0)\nprint("refused" if r < 0 and ctypes.get_errno() in (1, 38) else "allowed")\n',
      tests: [stdio('323', 'refused'), stdio('272', 'refused'), stdio('101', 'refused'), stdio('308', 'refused')],
    },
  },
  {
    cls: '6 syscalls',
    name: 'netlink and inet sockets; the interfaces it can see',
    verdicts: ['accepted'],
    req: {
      program:
        'import socket\nfor fam in (socket.AF_NETLINK, socket.AF_INET, socket.AF_INET6, socket.AF_PACKET):\n    try:\n        socket.socket(fam, socket.SOCK_RAW if fam != socket.AF_INET else socket.SOCK_STREAM); print("open")\n    except OSError:\n        print("refused")\nprint(sorted(l.split(":")[0].strip() for l in open("/proc/self/net/dev").read().splitlines()[2:]))\n',
      tests: [stdio('', "refused\nrefused\nrefused\nrefused\n['lo']")],
    },
  },
  // 7. Output that used to stall the reader
  {
    cls: '7 reader',
    name: '16 MiB of control characters',
    verdicts: ['accepted'],
    req: { program: 'import sys\nsys.stdout.write("\\x01" * (16 << 20))\n', tests: [stdio('', null)], limits: { outputBytes: 16 << 20 } },
    check: (r) => expect(r[0]!.output!.length).toBe(64 * 1024),
  },
  {
    cls: '7 reader',
    name: 'one byte over the output limit, counted before escaping',
    verdicts: ['output_limit'],
    req: { program: 'import sys\nsys.stdout.write("\\x01" * ((1 << 20) + 1))\n', tests: [stdio('', null)] },
  },
  // 8. Comparison
  {
    cls: '8 comparison',
    name: 'a set for an expected list in another order; a big integer off by one',
    verdicts: ['wrong_answer', 'accepted', 'wrong_answer', 'accepted', 'accepted'],
    req: {
      program: 'def f(k):\n    return {3, 1, 2} if k == 0 else 2 ** 64 + (1 if k == 1 else 0) if k < 3 else 10 ** 5000 if k == 3 else 1e19\n',
      entryPoint: 'f',
      tests: [call([0], [3, 1, 2]), call([0], [1, 2, 3]), call([1], 18446744073709551616n), call([3], BigInt(10) ** 5000n), call([4], 1e19)],
    },
  },
  // 9. Module load failures are told apart
  // 10. The channel between an assert test's oracle and the candidate: a claim channel too.
  {
    cls: '10 channel',
    name: 'writes garbage on the channel',
    verdicts: ['runtime_error'],
    req: {
      program: 'import os\ndef f(x):\n    os.write(7, b"\\x00\\x00\\x00\\x05hello")\n    return x\n',
      entryPoint: 'f',
      tests: [{ style: 'assert', code: 'assert f(1) == 1\nassert f(2) == 2' }],
    },
    check: (r) => expect(r[0]!.exceptionType).toBe('MalformedResult'),
  },
  {
    cls: '10 channel',
    name: 'forges a reply to the call it is answering',
    verdicts: ['wrong_answer', 'runtime_error'],
    req: {
      program: forgeReply(''),
      entryPoint: 'f',
      tests: [
        { style: 'assert', code: 'assert f(1, 5) == 6' },
        { style: 'assert', code: 'assert f(1, 7) == 7\nassert f(2, 8) == 8' },
      ],
    },
  },
  {
    // The real reply comes after the oracle has its record and has closed the channel: the
    // verdict is the test's (the forged value fails it, or passes it as the same value
    // returned would), whatever the timing; a test that reads on meets the late reply.
    cls: '10 channel',
    name: 'forges a reply, and its real reply meets a closed channel',
    verdicts: ['wrong_answer', 'accepted', 'runtime_error'],
    req: {
      program: forgeReply('    time.sleep(0.3)\n'),
      entryPoint: 'f',
      tests: [
        { style: 'assert', code: 'assert f(1, 5) == 6' },
        { style: 'assert', code: 'assert f(1, 7) == 7' },
        { style: 'assert', code: 'assert f(1, 7) == 7\nassert f(2, 8) == 8' },
      ],
    },
  },
  {
    cls: '10 channel',
    name: 'claims an exception class that is not one, and a frame over the limit',
    verdicts: ['runtime_error', 'output_limit'],
    req: {
      program:
        'import os, json\ndef f(x):\n    body = json.dumps(["exc", 1, [], {"$exc": {"id": 1, "n": "AssertionError ", "m": "builtins", "b": [], "h": 1, "x": True}, "args": []}]).encode()\n    os.write(7, len(body).to_bytes(4, "big") + body)\n    return 0\ndef g():\n    os.write(7, (1 << 31).to_bytes(4, "big"))\n    return 0\n',
      entryPoint: 'f',
      tests: [
        { style: 'assert', code: 'try:\n    f(1)\nexcept AssertionError:\n    pass' },
        { style: 'assert', code: 'assert g() == 0' },
      ],
    },
  },
  {
    cls: '9 load phase',
    name: 'top level raises',
    verdicts: ['runtime_error', 'runtime_error'],
    req: { program: 'raise ValueError("at import")\ndef f(x):\n    return x\n', entryPoint: 'f', tests: [call([1], 1), call([2], 2)] },
    check: (r) =>
      expect(r.map((x) => [x.phase, x.exceptionType])).toEqual([
        ['load', 'ValueError'],
        ['load', 'ValueError'],
      ]),
  },
  {
    cls: '9 load phase',
    name: 'a failure inside a test is phase test',
    verdicts: ['runtime_error', 'wrong_answer'],
    req: {
      program:
        'import sys\nif len(sys.argv) > 5:\n    raise KeyError("never")\ndef f(x):\n    if x == 1:\n        raise KeyError("in the test")\n    return x\n',
      entryPoint: 'f',
      tests: [
        { style: 'assert', code: 'assert f(1) == 1' },
        { style: 'assert', code: 'assert f(2) == 3' },
      ],
    },
    check: (r) =>
      expect(r.map((x) => [x.phase, x.exceptionType])).toEqual([
        ['test', 'KeyError'],
        ['test', undefined],
      ]),
  },
  {
    cls: '9 load phase',
    name: 'top level raises under assert tests',
    verdicts: ['runtime_error'],
    req: {
      program: 'raise KeyError("at import")\ndef f(x):\n    return x\n',
      entryPoint: 'f',
      tests: [{ style: 'assert', code: 'def check(candidate):\n    assert candidate(1) == 1\n' }],
    },
    check: (r) => expect([r[0]!.phase, r[0]!.exceptionType]).toEqual(['load', 'KeyError']),
  },
];

const CORRECT: RunRequest = { program: 'import os\nprint(sorted(os.listdir(".")), input())', tests: [stdio('7', '[] 7'), stdio('8', '[] 8')] };

describe.each(['auto', 'none'] as const)('attacks by class (isolation %s)', (isolation) => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    // One server: the correct program queued behind the attacker runs on the same one.
    sandbox = await createSandbox({ workers: 1, isolation, defaultLimits: limits, warn: () => undefined });
  });
  afterAll(async () => sandbox.close());

  for (const a of attacks) {
    it(`class ${a.cls}: ${a.name} -> ${a.verdicts.join(', ')}`, async () => {
      if (a.cls.startsWith('5') && !sandbox.cgroup) return void expect((await sandbox.run(CORRECT))[0]!.cgroup).toBe(false);
      const [r, queued] = await Promise.all([sandbox.run(a.req), sandbox.run(CORRECT)]);
      expect(
        r.map((x) => x.verdict),
        JSON.stringify(r).slice(0, 2000),
      ).toEqual(a.verdicts);
      a.check?.(r, sandbox);
      expect(
        queued.map((x) => x.verdict),
        JSON.stringify(queued),
      ).toEqual(['accepted', 'accepted']);
      const after = await sandbox.run(CORRECT);
      expect(after.map((x) => x.verdict)).toEqual(['accepted', 'accepted']);
    }, 60_000);
  }

  it('class 3 shared heap: a program scanning its whole address space finds no byte of earlier runs', async () => {
    const secret = `QZXW${Math.random().toString(36).slice(2, 12).toUpperCase()}`;
    // Earlier runs: a candidate printing it and a reference holding it in its source and input.
    await sandbox.run({ program: `print("${secret}", input())`, tests: [stdio(secret, `${secret} ${secret}`)] });
    await sandbox.run({
      program: `S = "${secret}"\ndef f(x):\n    return S + x`,
      entryPoint: 'f',
      tests: [call([secret], secret + secret)],
      role: 'reference',
    });
    await sandbox.run({ program: 'def f(x):\n    return x\n', entryPoint: 'f', tests: [{ style: 'assert', code: `assert f(1) != "${secret}"` }] });
    // The scanner looks for the secret through a byte mapping whose image of its own needle is
    // not the needle: only a real copy of the secret matches.
    const rot = (s: string) =>
      s.replace(/[A-Z]/g, (c) => String.fromCharCode(((c.charCodeAt(0) - 65 + 13) % 26) + 65)).replace(/[0-9]/g, (c) => String((Number(c) + 5) % 10));
    const scanner = [
      'import re',
      'up = bytes(range(65, 91)); dn = bytes(range(48, 58))',
      'table = bytearray(range(256))',
      'for i in range(26): table[65 + i] = 65 + (i + 13) % 26',
      'for i in range(10): table[48 + i] = 48 + (i + 5) % 10',
      'table = bytes(table)',
      `needle = ${JSON.stringify(rot(secret))}.encode()`,
      'import ctypes; ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again: /proc/self/mem becomes ours',
      'hits = 0; scanned = 0',
      'mem = open("/proc/self/mem", "rb", 0)',
      'for line in open("/proc/self/maps").read().splitlines():',
      '    parts = line.split()',
      '    if parts[1][0] != "r" or (len(parts) > 5 and parts[5] in ("[vvar]", "[vsyscall]")): continue',
      '    a, b = (int(x, 16) for x in parts[0].split("-"))',
      '    try:',
      '        mem.seek(a); data = mem.read(b - a)',
      '    except (OSError, ValueError, OverflowError):',
      '        continue',
      '    scanned += len(data)',
      '    hits += data.translate(table).count(needle)',
      'print("hits", hits, "scanned", scanned > 10 << 20)',
    ].join('\n');
    const r = await sandbox.run({ program: scanner, tests: [stdio('', 'hits 0 scanned True')], limits: { memoryMb: 512, timeSeconds: 5, wallSeconds: 10 } });
    expect(r[0]!.verdict, JSON.stringify(r)).toBe('accepted');
    // The scanner does find the secret when it is in its own memory: the probe works.
    const self = await sandbox.run({
      program: `x = "${secret}" * 2\n` + scanner,
      tests: [stdio('', null)],
      limits: { memoryMb: 512, timeSeconds: 5, wallSeconds: 10 },
    });
    expect(self[0]!.output).toMatch(/^hits [1-9]/);
  }, 60_000);

  it('class 4 cross-run state: files left in /tmp, /dev/shm or /var/tmp do not reach the next program', async () => {
    const places = ['/tmp', '/dev/shm', '/var/tmp', '.'];
    const writer = `import os\nfor d in ${JSON.stringify(places)}:\n    try:\n        open(os.path.join(d, "crucible-attack-left"), "w").write("x"); print(d, "written")\n    except OSError:\n        print(d, "refused")\n`;
    const reader = `import os\nprint([d for d in ${JSON.stringify(places)} if os.path.exists(os.path.join(d, "crucible-attack-left"))])\n`;
    const [w, r, queued] = await Promise.all([
      sandbox.run({ program: writer, tests: [stdio('', null)] }),
      sandbox.run({ program: reader, tests: [stdio('', '[]'), stdio('', '[]')] }),
      sandbox.run(CORRECT),
    ]);
    expect(w[0]!.verdict).toBe('accepted');
    // Only its own run directory is writable, with or without bubblewrap (as root).
    if (process.getuid?.() === 0) expect(w[0]!.output).toBe('/tmp refused\n/dev/shm refused\n/var/tmp refused\n. written\n');
    expect(
      r.map((x) => x.verdict),
      JSON.stringify(r),
    ).toEqual(['accepted', 'accepted']);
    expect(queued.map((x) => x.verdict)).toEqual(['accepted', 'accepted']);
  });

  it('leaves nothing in the host /tmp', () => {
    expect(readdirSync(os.tmpdir()).filter((n) => n.startsWith('crucible-attack'))).toEqual([]);
  });
});
