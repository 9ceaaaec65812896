import { describe, expect, it } from 'vitest';
import { EXIT_BAD_INPUT, EXIT_FAILED, userFacing } from '../../src/cli/errors.js';
import { SandboxInputError, SandboxSetupError } from '../../src/sandbox/index.js';
import { parseBatchFile } from '../../src/sandbox/batch-file.js';
import { parseTestsFile } from '../../src/sandbox/tests-file.js';
import { ReadModelError } from '../../src/projections/readmodel.js';
import { ActorFailedError } from '../../src/actors/runtime.js';
import { DatasetError } from '../../src/datasets/errors.js';

describe("the CLI maps each layer's errors by class", () => {
  it('bad input files of the sandbox are typed and exit 2 with their message', () => {
    let thrown: unknown;
    try {
      parseBatchFile('{"id": "a", "program": "print(1)", "tests": [{"input": "", "output": "1"}]}\nnot json\n', 'runs.jsonl');
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(SandboxInputError);
    expect(userFacing(thrown)).toEqual({ message: expect.stringMatching(/^runs\.jsonl:2: not valid JSON/), exitCode: EXIT_BAD_INPUT });
    expect(() => parseTestsFile('', 'tests.jsonl')).toThrow(SandboxInputError);
    expect(userFacing(new SandboxSetupError('no python'))?.exitCode).toBe(EXIT_BAD_INPUT);
    expect(userFacing(new DatasetError('rows.jsonl: line 3'))?.exitCode).toBe(EXIT_BAD_INPUT);
  });

  it('a read model or an actor that failed is a failure (exit 1)', () => {
    expect(userFacing(new ReadModelError('views.db: table missing'))).toEqual({ message: 'views.db: table missing', exitCode: EXIT_FAILED });
    expect(userFacing(new ActorFailedError('judge', 'k', new Error('boom')))).toEqual({ message: 'actor judge failed on k: boom', exitCode: EXIT_FAILED });
  });

  it('anything else is a bug: not mapped, so it keeps its stack', () => {
    expect(userFacing(new Error('undefined is not a function'))).toBeNull();
    expect(userFacing(new TypeError('x'))).toBeNull();
  });
});
