/**
 * The judge gets honest programs right: for each way the value channel, the process model, the
 * names a test reaches, program exit, checkers, entry points and sizes could change what a
 * Python program means, an honest program judged as CPython runs it, and an attack on the same
 * cause that must not pass. Each runs with bubblewrap (where it works here, asserted) and
 * without, followed by a clean program on the same server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestCase } from '../../src/core/problem.js';
import { createSandbox, SERVER_PATH, type Sandbox, type TestResult } from '../../src/sandbox/index.js';
import { BWRAP } from '../support/bwrap.js';
import { parseTestsFile } from '../../src/sandbox/tests-file.js';

const asserts = (...codes: string[]): TestCase[] => codes.map((code) => ({ style: 'assert', code }));
const stdio = (input: string, output: string): TestCase => ({ style: 'stdio', input, output });

interface Case {
  cause: string;
  name: string;
  program: string;
  tests: TestCase[];
  entryPoint?: string;
  limits?: { timeSeconds?: number; wallSeconds?: number; outputBytes?: number };
  verdicts: TestResult['verdict'][];
  check?: (r: TestResult[]) => void;
}

const LISTNODE = 'class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n';
const cases: Case[] = [
  // 1. One lossless value codec from end to end.
  {
    cause: '1 values',
    name: 'floats stay floats both ways, ints stay ints',
    entryPoint: 'f',
    verdicts: ['accepted', 'accepted', 'accepted', 'accepted'],
    program: 'def f(x):\n    return (type(x).__name__, x * 1.0, str(x))\n',
    tests: asserts(
      'assert f(3.0) == ("float", 3.0, "3.0")',
      'r = f(5)\nassert r[0] == "int" and type(r[1]) is float and str(r[1]) == "5.0"',
      'assert f(-0.0)[2] == "-0.0"',
      'import math\nassert math.isnan(f(float("nan"))[1]) and f(float("inf"))[2] == "inf"',
    ),
  },
  {
    cause: '1 values',
    name: 'big ints, complex, bytes, Decimal, Fraction, frozenset',
    entryPoint: 'f',
    verdicts: ['accepted'],
    program:
      'from decimal import Decimal\nfrom fractions import Fraction\ndef f(n):\n    return [n + 1, complex(1, -2), b"\\x00\\xff", bytearray(b"ab"), Decimal("1.10"), Fraction(1, 3), frozenset({1, 2}), None, True]\n',
    tests: asserts(
      'from decimal import Decimal\nfrom fractions import Fraction\nr = f(10**40)\nassert r == [10**40 + 1, 1-2j, b"\\x00\\xff", bytearray(b"ab"), Decimal("1.10"), Fraction(1, 3), frozenset({1, 2}), None, True]\nassert str(r[4]) == "1.10" and type(r[3]) is bytearray and type(r[6]) is frozenset',
    ),
  },
  {
    cause: '1 values',
    name: 'OrderedDict order, defaultdict factory, Counter, deque',
    entryPoint: 'f',
    verdicts: ['accepted'],
    program:
      'from collections import OrderedDict, defaultdict, Counter, deque\ndef f():\n    d = defaultdict(list)\n    d["a"].append(1)\n    return OrderedDict([("b", 1), ("a", 2)]), d, Counter("aab"), deque([1, 2], maxlen=3)\n',
    tests: asserts(
      'from collections import OrderedDict, deque\no, d, c, q = f()\nassert type(o) is OrderedDict and list(o) == ["b", "a"]\nassert d["missing"] == [] and d["a"] == [1]\nassert c.most_common(1) == [("a", 2)]\nassert q.maxlen == 3 and list(q) == [1, 2]',
    ),
  },
  {
    cause: '1 values',
    name: 'in-place changes reach the rows the test holds, lists inside tuples included',
    entryPoint: 'f',
    verdicts: ['accepted', 'accepted'],
    program: 'def f(rows):\n    for r in rows:\n        r.sort()\n    rows[0].append(99)\n',
    tests: asserts(
      'rows = [[3, 1], [2, 0]]\nfirst = rows[0]\nf(rows)\nassert first == [1, 3, 99] and rows == [[1, 3, 99], [0, 2]]',
      't = ([2, 1], [5, 4])\nf(t)\nassert t == ([1, 2, 99], [4, 5])',
    ),
  },
  {
    cause: '1 values',
    name: 'shared and nested references keep their identity',
    entryPoint: 'f',
    verdicts: ['accepted'],
    program: 'def f(a, b):\n    a.append(1)\n    return a is b, b\n',
    tests: asserts('x = []\nsame, back = f(x, x)\nassert same and back is x and x == [1]'),
  },
  {
    cause: '1 values',
    name: 'a call-style argument written 3.0 in a tests file reaches the program as a float',
    entryPoint: 'f',
    verdicts: ['accepted', 'accepted'],
    program: 'def f(x):\n    return type(x).__name__\n',
    tests: parseTestsFile('{"args": [3.0], "expected": "float"}\n{"args": [3], "expected": "int"}\n', 'tests.jsonl').tests,
  },
  // 2. One candidate process per test: module state kept, the test's limits over all its calls.
  {
    cause: '2 process',
    name: 'a stateful function counts across the calls of one test, and starts again in the next',
    entryPoint: 'next_ticket',
    verdicts: ['accepted', 'accepted'],
    program: 'n = 0\ndef next_ticket():\n    global n\n    n += 1\n    return n\n',
    tests: asserts('assert [next_ticket() for _ in range(3)] == [1, 2, 3]', 'assert next_ticket() == 1'),
  },
  {
    cause: '2 process',
    name: 'six calls of 0.4 s of CPU are over a 1 s limit',
    entryPoint: 'slow',
    verdicts: ['time_limit'],
    limits: { timeSeconds: 1, wallSeconds: 4 },
    program: 'import time\ndef slow():\n    t = time.process_time()\n    while time.process_time() - t < 0.4:\n        pass\n    return 1\n',
    tests: asserts('assert sum(slow() for _ in range(6)) == 6'),
  },
  // 3. What a test may reach in the program.
  {
    cause: '3 names',
    name: 'a program that defines abs, sorted, all and set changes nothing in the test',
    entryPoint: 'f',
    verdicts: ['wrong_answer', 'accepted'],
    program:
      'def abs(x):\n    return 0\ndef sorted(x):\n    return [1, 2, 3]\ndef all(x):\n    return True\ndef set(*a):\n    return 0\ndef f(x):\n    return x + 1\n',
    tests: asserts('assert abs(f(1) - 5) < 1e-6', 'assert sorted([f(2), f(0)]) == [1, 3] and not all([False]) and set([1]) == {1}'),
  },
  {
    cause: '3 names',
    name: 'program classes: construct, pass, return, attributes, methods, isinstance',
    entryPoint: 'reverse',
    verdicts: ['accepted', 'accepted'],
    program: `${LISTNODE}def reverse(head):\n    prev = None\n    while head:\n        head.next, prev, head = prev, head, head.next\n    return prev\nclass Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n    def __len__(self):\n        return len(self.items)\n`,
    tests: asserts(
      'r = reverse(ListNode(1, ListNode(2, ListNode(3))))\nout = []\nwhile r:\n    out.append(r.val)\n    r = r.next\nassert out == [3, 2, 1] and isinstance(reverse(ListNode(7)), ListNode)',
      's = Stack()\ns.push(1)\ns.push([2])\nassert s.pop() == [2] and len(s) == 1 and s.items == [1]',
    ),
  },
  {
    cause: '3 names',
    name: 'a lambda and a test function passed to the candidate run in the test',
    entryPoint: 'apply',
    verdicts: ['accepted'],
    program: 'def apply(f, xs, key=None):\n    return sorted((f(x) for x in xs), key=key)\n',
    tests: asserts(
      'seen = []\ndef neg(x):\n    seen.append(x)\n    return -x\nassert apply(lambda x: x * 2, [3, 1, 2], key=neg) == [6, 4, 2] and sorted(seen) == [2, 4, 6]',
    ),
  },
  {
    cause: '3 names',
    name: "a program's exception keeps its class hierarchy and args",
    entryPoint: 'f',
    verdicts: ['accepted', 'accepted', 'runtime_error'],
    program: 'class InvalidInput(ValueError):\n    pass\ndef f(x):\n    if x < 0:\n        raise InvalidInput("bad", x)\n    return x\n',
    tests: asserts(
      'try:\n    f(-1)\nexcept ValueError as e:\n    assert e.args == ("bad", -1) and type(e).__name__ == "InvalidInput"\nelse:\n    assert False',
      'try:\n    f(-2)\nexcept InvalidInput:\n    pass\nelse:\n    assert False',
      'f(-3)',
    ),
    check: (r) => expect([r[2]!.exceptionType, r[2]!.message]).toEqual(['InvalidInput', "('bad', -3)"]),
  },
  {
    cause: '3 names',
    name: "equality is the test's, never the program's __eq__; equal objects of a class are equal",
    entryPoint: 'f',
    verdicts: ['wrong_answer', 'wrong_answer', 'accepted'],
    program:
      'from dataclasses import dataclass\nclass Liar:\n    def __eq__(self, o):\n        return True\n    def __ne__(self, o):\n        return False\n@dataclass\nclass Point:\n    x: int\n    y: int\ndef f(k):\n    return Liar() if k == 0 else Point(1, 2)\n',
    tests: asserts('assert f(0) == 5', 'assert not (f(0) != [1])', 'assert f(1) == Point(1, 2) and f(1) != Point(2, 1)'),
  },
  {
    cause: '3 names',
    name: 'class Solution in a test, as LeetCode harnesses call it',
    entryPoint: 'twoSum',
    verdicts: ['accepted'],
    program:
      'class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i\n',
    tests: asserts('assert Solution().twoSum([2, 7, 11], 9) == [0, 1]'),
  },
  // 4. A program ends as CPython ends it.
  {
    cause: '4 exit',
    name: 'the threading.Thread(target=main) idiom prints its answer',
    verdicts: ['accepted'],
    program: 'import threading\ndef main():\n    print(int(input()) * 2)\nthreading.Thread(target=main).start()\n',
    tests: [stdio('21\n', '42')],
  },
  {
    cause: '4 exit',
    name: 'atexit-flushed fast output keeps all of it',
    verdicts: ['accepted'],
    program:
      'import atexit, io, os, sys\nbuf = io.StringIO()\nsys.stdout = buf\natexit.register(lambda: os.write(1, buf.getvalue().encode()))\nfor i in range(3):\n    print(i)\n',
    tests: [stdio('', '0\n1\n2')],
  },
  // 6. Entry points: the program's own definition first, then class Solution, never the prelude.
  {
    cause: '6 entry',
    name: "a bare name finds Solution().gcd, not the prelude's math.gcd",
    entryPoint: 'gcd',
    verdicts: ['accepted'],
    program: 'class Solution:\n    def gcd(self, a, b):\n        return 42\n',
    tests: [{ style: 'call', args: [4, 6], expected: 42 }],
  },
  {
    cause: '6 entry',
    name: "the program's own function before a Solution method",
    entryPoint: 'f',
    verdicts: ['accepted'],
    program: 'def f(x):\n    return 1\nclass Solution:\n    def f(self, x):\n        return 2\n',
    tests: [{ style: 'call', args: [0], expected: 1 }],
  },
  // 7. Sizes bounded before encoding: a test's values are held to its output limit.
  {
    cause: '7 sizes',
    name: "values over the output limit are the program's output_limit, never a sandbox error",
    entryPoint: 'f',
    verdicts: ['output_limit', 'output_limit', 'accepted'],
    limits: { outputBytes: 1 << 20 },
    program: 'def f(n):\n    return "x" * n\n',
    tests: [
      ...asserts('for _ in range(36):\n    assert len(f(2 << 20)) == 2 << 20'),
      { style: 'call', args: [2 << 20] },
      { style: 'call', args: [10], expected: 'xxxxxxxxxx' },
    ],
  },
  // Design choices that still change a program's meaning (src/sandbox/README.md says why).
  {
    cause: 'choice',
    name: 'values are copied at each call: a list the program kept does not see later changes',
    entryPoint: 'keep',
    verdicts: ['accepted'],
    program: 'saved = None\ndef keep(a):\n    global saved\n    saved = a\ndef get():\n    return saved\n',
    tests: asserts('x = [1]\nkeep(x)\nx.append(2)\nassert get() == [1]'),
  },
  {
    cause: 'choice',
    name: "objects are equal by class and attributes, not by the program's __eq__",
    entryPoint: 'f',
    verdicts: ['wrong_answer'],
    program:
      'class Item:\n    def __init__(self, id, note):\n        self.id, self.note = id, note\n    def __eq__(self, o):\n        return self.id == o.id\ndef f(note):\n    return Item(1, note)\n',
    tests: asserts('assert f("a") == Item(1, "b")'),
  },
  {
    cause: 'choice',
    name: 'a subclass of a builtin type crosses as that type',
    entryPoint: 'f',
    verdicts: ['wrong_answer'],
    program: 'class MyList(list):\n    pass\ndef f():\n    return MyList([1])\n',
    tests: asserts('assert type(f()).__name__ == "MyList"'),
  },
  {
    cause: 'choice',
    name: "a test reaches the program's functions and classes, not its other globals",
    entryPoint: 'f',
    verdicts: ['runtime_error'],
    program: 'MOD = 7\ndef f(x):\n    return x % MOD\n',
    tests: asserts('assert f(9) == 9 % MOD'),
    check: (r) => expect(r[0]!.exceptionType).toBe('NameError'),
  },
  {
    cause: 'choice',
    name: "a function of the test is called from the program's main thread only",
    entryPoint: 'f',
    verdicts: ['runtime_error', 'accepted'],
    program:
      'import threading\ndef f(cb):\n    out = []\n    def run():\n        try:\n            out.append(cb(1))\n        except RuntimeError as e:\n            out.append(str(e))\n    t = threading.Thread(target=run)\n    t.start()\n    t.join()\n    if isinstance(out[0], str):\n        raise RuntimeError(out[0])\n    return out[0]\ndef g(cb):\n    return cb(2)\n',
    tests: asserts('assert f(lambda x: x + 1) == 2', 'assert g(lambda x: x + 1) == 3'),
    check: (r) => expect(r[0]!.message).toMatch(/main thread only/),
  },
];

describe.each([BWRAP ? 'bwrap' : 'auto', 'none'] as const)('Python semantics (isolation %s)', (isolation) => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await createSandbox({ workers: 2, isolation, warn: () => undefined });
  });
  afterAll(async () => {
    await sandbox.close();
  });

  it('runs with the isolation it asked for', () => {
    expect(sandbox.isolation).toBe(isolation === 'bwrap' ? 'bwrap' : 'rlimits');
  });

  for (const c of cases) {
    it(`${c.cause}: ${c.name} -> ${c.verdicts.join(', ')}`, async () => {
      const styles = new Set(c.tests.map((t) => t.style));
      const results: TestResult[] = [];
      // One request per style (a request holds one style).
      for (const style of styles) {
        const idx = c.tests.flatMap((t, i) => (t.style === style ? [i] : []));
        const r = await sandbox.run({
          program: c.program,
          tests: idx.map((i) => c.tests[i]!),
          ...(c.entryPoint ? { entryPoint: c.entryPoint } : {}),
          ...(c.limits ? { limits: c.limits } : {}),
        });
        r.forEach((x) => (results[idx[x.test]!] = { ...x, test: idx[x.test]! }));
      }
      expect(
        results.map((x) => x.verdict),
        JSON.stringify(results),
      ).toEqual(c.verdicts);
      c.check?.(results);
      const after = await sandbox.run({ program: 'def g(x):\n    return x\n', entryPoint: 'g', tests: asserts('assert g(1) == 1') });
      expect(after[0]!.verdict).toBe('accepted');
    });
  }
});
