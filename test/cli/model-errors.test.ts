/** A model server that stays down ends a command with one line and exit status 1, not a stack. */
import { describe, expect, it } from 'vitest';
import { userFacing, EXIT_FAILED } from '../../src/cli/errors.js';
import { ModelRequestError } from '../../src/policies/openai/errors.js';
import { BridgeDeadError } from '../../src/bridge/errors.js';

describe('model and trainer failures at the CLI', () => {
  it('an exhausted model request says what failed and that the run resumes', () => {
    const err = new ModelRequestError('http://127.0.0.1:8002/v1/completions', [
      { attempt: 1, kind: 'network', message: 'fetch failed: connect ECONNREFUSED', status: null, retrying: false, delayMs: 0 },
    ]);
    expect(userFacing(err)).toEqual({
      message: expect.stringMatching(/8002.*1 try failed; last: network: fetch failed[\s\S]*run the same command again/),
      exitCode: EXIT_FAILED,
    });
  });

  it('a dead gpu-bridge likewise', () => {
    expect(userFacing(new BridgeDeadError('exited with code 1', 'ImportError: torch'))).toMatchObject({
      exitCode: EXIT_FAILED,
      message: expect.stringContaining('gpu-bridge is dead'),
    });
  });
});
