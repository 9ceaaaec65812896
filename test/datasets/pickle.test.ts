import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeBase64ZlibPickle, PickleError, unpickle } from '../../src/datasets/loaders/pickle.js';

const PY = process.env.CRUCIBLE_PYTHON ?? '/usr/bin/python3';
const FIXTURES = join(import.meta.dirname, '../fixtures/datasets');

/** Pickles `expr` with the real Python pickle module, at the given protocol. */
function pyPickle(expr: string, protocol: number): Uint8Array {
  const code = `import sys, pickle\nsys.stdout.buffer.write(pickle.dumps(${expr}, protocol=${protocol}))`;
  return new Uint8Array(execFileSync(PY, ['-c', code]));
}

const VALUE =
  "{'s': 'héllo \\u2603 \\U0001F600', 'n': None, 't': True, 'f': False, 'i': [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31 - 1, 2**40], " +
  "'big': 2**70, 'neg': -2**70, 'x': 1.5, 'e': -0.0, 'b': b'\\x00\\xff', 'tup': (1, (2, 3), ()), 'nested': {'k': [[], {}]}, 'long': 'z' * 300, 7: 'int key'}";

const EXPECTED = {
  s: 'héllo \u2603 \u{1F600}',
  n: null,
  t: true,
  f: false,
  i: [0, 1, -1, 255, 256, 65535, 65536, -(2 ** 31), 2 ** 31 - 1, 2 ** 40],
  big: 2n ** 70n,
  neg: -(2n ** 70n),
  x: 1.5,
  e: -0,
  b: new Uint8Array([0, 255]),
  tup: [1, [2, 3], []],
  nested: { k: [[], {}] },
  long: 'z'.repeat(300),
  '7': 'int key',
};

describe('restricted unpickler', () => {
  for (const protocol of [0, 1, 2, 3, 4, 5]) {
    it(`decodes plain data pickled by Python at protocol ${protocol}`, () => {
      // Protocol 0-2 have no bytes opcode: Python pickles bytes there through a GLOBAL call.
      const expr = protocol < 3 ? VALUE.replace("'b': b'\\x00\\xff', ", '') : VALUE;
      const expected: Record<string, unknown> = { ...EXPECTED };
      if (protocol < 3) delete expected.b;
      expect(unpickle(pyPickle(expr, protocol))).toEqual(expected);
    });
  }

  it('keeps shared references (memo) as the same value', () => {
    const v = unpickle(pyPickle('(lambda l: [l, l])([1, 2])', 4)) as number[][];
    expect(v).toEqual([
      [1, 2],
      [1, 2],
    ]);
    expect(v[0]).toBe(v[1]);
  });

  it('refuses a pickle that would run a command, and runs nothing', () => {
    const marker = join(tmpdir(), `crucible-pickle-${process.pid}`);
    rmSync(marker, { force: true });
    for (const protocol of [0, 2, 4]) {
      const evil = pyPickle(`type('E', (), {'__reduce__': lambda self: (__import__('os').system, ('touch ${marker}',))})()`, protocol);
      expect(() => unpickle(evil)).toThrow(PickleError);
      expect(() => unpickle(evil)).toThrow(/(GLOBAL|STACK_GLOBAL).*not allowed/);
    }
    expect(existsSync(marker)).toBe(false);
  });

  it.each([
    ['BUILD', 'b'],
    ['INST', 'i'],
    ['OBJ', 'o'],
    ['REDUCE', 'R'],
    ['NEWOBJ', '\x81'],
    ['EXT1', '\x82'],
    ['PERSID', 'P'],
  ])('names the refused opcode %s', (name, op) => {
    const bytes = new Uint8Array(Buffer.from(`\x80\x04N${op}.`, 'latin1'));
    expect(() => unpickle(bytes)).toThrow(new RegExp(`opcode ${name} \\(0x[0-9a-f]+\\) is not allowed.*at byte 3`));
  });

  it('refuses sets and unknown opcodes, and truncated or unterminated pickles', () => {
    expect(() => unpickle(pyPickle('{1, 2}', 4))).toThrow(/unsupported pickle opcode 0x8f/);
    const good = pyPickle("'abcdef'", 4);
    expect(() => unpickle(good.subarray(0, good.length - 4))).toThrow(/truncated pickle/);
    expect(() => unpickle(good.subarray(0, good.length - 1))).toThrow(/truncated pickle/);
    expect(() => unpickle(new Uint8Array([0x80, 0x04, 0x4e, 0x4e, 0x2e]))).toThrow(/stack not empty/);
  });

  it('decodes the LiveCodeBench private-test blob fixture: base64(zlib(pickle(json text)))', () => {
    const blob = readFileSync(join(FIXTURES, 'lcb_private_blob.txt'), 'utf8');
    const inner = decodeBase64ZlibPickle(blob);
    expect(typeof inner).toBe('string');
    const tests = JSON.parse(inner as string);
    expect(tests).toHaveLength(3);
    expect(tests[0]).toEqual({ input: '[4, 4]\n1', output: '4', testtype: 'functional' });
  });

  it('says when a blob is not zlib data', () => {
    expect(() => decodeBase64ZlibPickle(Buffer.from('plain text').toString('base64'))).toThrow(/not zlib data/);
  });
});
