import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDemoProblem } from '../../src/datasets/demo/check.js';
import { DEMO_DIR, demoFiles, loadDemo, loadDemoExtras, loadDemoProblems } from '../../src/datasets/demo/index.js';
import { parseStdio, printStdio } from '../../src/datasets/demo/input-spec.js';
import { createSandbox, type Sandbox } from '../../src/sandbox/index.js';

const demo = loadDemo();

describe('demo problem set', () => {
  it('loads problems and extras that line up, mixing stdio and call styles', () => {
    const problems = loadDemoProblems();
    const extras = loadDemoExtras();
    expect(problems.length).toBe(demoFiles().length);
    expect(extras.map((e) => e.problemId)).toEqual(problems.map((p) => p.id));
    expect(problems.some((p) => p.style === 'stdio')).toBe(true);
    expect(problems.some((p) => p.style === 'call')).toBe(true);
    for (const p of problems) {
      expect(p.tests.public.length, p.id).toBeGreaterThanOrEqual(2);
      expect(p.tests.private.length, p.id).toBeGreaterThanOrEqual(10);
      expect(p.tests.private.length, p.id).toBeLessThanOrEqual(20);
      expect(p.statement, p.id).toMatch(/constraint/i);
    }
  });

  it('reads every stdio example back into typed values and prints it the same way', () => {
    for (const { problem, extras } of demo) {
      if (problem.style !== 'stdio') continue;
      for (const t of problem.tests.public) {
        if (t.style !== 'stdio') continue;
        const values = parseStdio(extras.inputSpec, t.input);
        expect(printStdio(extras.inputSpec, values).trim(), problem.id).toBe(t.input.trim());
      }
    }
  });

  let sandbox: Sandbox;
  type Check = Awaited<ReturnType<typeof checkDemoProblem>>;
  /** Each problem's check, all started at once: a problem's slow programs (tests that run to
   * their time limit, one after another) leave the sandbox's other fork-servers to the others. */
  const checks = new Map<string, Promise<{ check: Check } | { error: unknown }>>();
  beforeAll(async () => {
    sandbox = await createSandbox({ warn: () => {} });
    for (const d of demo)
      checks.set(
        d.problem.id,
        checkDemoProblem(d, sandbox).then(
          (check) => ({ check }),
          (error: unknown) => ({ error }),
        ),
      );
  });
  afterAll(async () => {
    await Promise.all(checks.values());
    await sandbox.close();
  });

  describe.each(demo.map((d) => [d.problem.id, d] as const))('%s', (_id, d) => {
    it('reference and variants pass everything, each bug fails a held-out test, invalid inputs are rejected', async () => {
      const result = await checks.get(d.problem.id)!;
      if ('error' in result) throw result.error;
      const c = result.check;
      for (const p of c.programs) {
        if (p.kind === 'bug') {
          expect(p.heldoutPassed, `${p.name} must fail a held-out test`).toBeLessThan(c.heldout);
        } else {
          expect([p.name, p.examplesPassed, p.heldoutPassed]).toEqual([p.name, c.examples, c.heldout]);
        }
      }
      expect(c.invalidRejected.every(Boolean), 'the reference raises on every invalid input').toBe(true);
      // The checks share the sandbox: the first may wait for most of them.
    }, 300_000);
  });
});

describe('demo loader errors', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'demo-bad-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('names the file and the field when a problem file is wrong', () => {
    const good = readFileSync(demoFiles()[0] as string, 'utf8');
    writeFileSync(path.join(dir, 'broken.yaml'), good.replace(/^style: \w+$/m, 'style: telepathy'));
    expect(() => loadDemoProblems(dir)).toThrow(/broken\.yaml: style/);
  });

  it('refuses a file whose held-out tests have no expected values yet', () => {
    const good = readFileSync(demoFiles()[0] as string, 'utf8');
    writeFileSync(path.join(dir, 'broken.yaml'), good.replace(/, expected: [^}]+ \}/g, ' }'));
    expect(() => loadDemoProblems(dir)).toThrow(/broken\.yaml: (examples|heldout)\.0: no expected value/);
  });

  it('reads from its own folder by default', () => {
    expect(demoFiles(DEMO_DIR).length).toBeGreaterThan(0);
  });
});
