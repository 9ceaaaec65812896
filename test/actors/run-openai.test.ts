/**
 * A whole run (real SQLite log, real sandbox, real python) whose policies are sampled over HTTP
 * from StandInOpenAIServer, a stand-in for a model server, which answers with the demo problems'
 * reference and buggy programs and with tests read from their public tests, and misbehaves on the
 * first requests (malformed JSON, a 500, no choices, the wrong n, a hang). Every fault is a
 * recorded failure and a retry; the run completes with every sample recorded once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig } from '../support/small-config.js';
import { StandInOpenAIServer, type Fault } from '../support/stand-in-openai-server.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { loadDemoProblems } from '../../src/datasets/demo/index.js';
import { parseConfig } from '../../src/config/load.js';
import { runCli } from '../support/cli.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { recordedEvents } from '../support/run-log.js';
import { catalogCache } from '../support/catalog-cache.js';

/** A JSON value as a Python literal. */
const py = (v: unknown): string =>
  v === null
    ? 'None'
    : v === true
      ? 'True'
      : v === false
        ? 'False'
        : Array.isArray(v)
          ? `[${v.map(py).join(', ')}]`
          : typeof v === 'object'
            ? `{${Object.entries(v as object)
                .map(([k, x]) => `${JSON.stringify(k)}: ${py(x)}`)
                .join(', ')}}`
            : JSON.stringify(v);

const FAULTS: Fault[] = ['malformed-json', 'http-500', 'empty-choices', 'wrong-n', 'hang'];
let root: string;
let server: StandInOpenAIServer;
let outcome: RunOutcome;
let events: EventEnvelope[];

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-openai-run-'));
  const problems = loadDemoProblems();
  server = await StandInOpenAIServer.start(({ prompt, n }) => {
    const p = problems.find((q) => prompt.includes(q.statement.trim()));
    if (!p) return Array.from({ length: n }, () => 'I do not know this problem.');
    if (prompt.startsWith('Solve')) {
      // Half correct, some buggy, one answer with no code at all.
      const programs = [p.solutions[0]!, p.incorrectSolutions[0] ?? p.solutions[0]!, p.solutions[0]!, null];
      return Array.from({ length: n }, (_, i) => {
        const program = programs[i % programs.length];
        return program === null ? 'This problem is hard; I will skip it.' : `Here is my solution:\n\`\`\`python\n${program}\`\`\`\n`;
      });
    }
    const fn = p.entryPoint!.split('.').pop()!;
    const lines = p.tests.public.map((t) => (t.style === 'call' ? `assert ${fn}(${t.args.map(py).join(', ')}) == ${py(t.expected)}` : ''));
    return Array.from({ length: n }, (_, i) => `Tests:\n\`\`\`python\n${lines.slice(0, 2 + (i % 2)).join('\n')}\nassert ${fn}(undefined_name) == 1\n\`\`\``);
  });
  server.faults = [...FAULTS];
  const base = smallConfig(root);
  const openai = { baseUrl: server.baseUrl, model: 'stand-in', concurrency: 2, timeoutMs: 1500, maxTokens: 256, retry: { attempts: 4, baseDelayMs: 10 } };
  const config = parseConfig({
    ...base,
    rounds: 2,
    sampling: { ...base.sampling, groupSize: 4, whiteBox: true },
    policies: { code: { backend: 'openai', openai }, test: { backend: 'openai', openai } },
    learner: { control: 'frozen' },
  });
  outcome = await runExperiment({ config, dir: path.join(root, 'run'), cacheDir: catalogCache() });
  events = await recordedEvents(outcome.dir);
}, 300_000);

afterAll(async () => {
  await server?.close();
  rmSync(root, { recursive: true, force: true });
});

const ofType = (t: string) => events.filter((e) => e.type === t).map((e) => e.data as Record<string, unknown>);

describe('a run sampled from an OpenAI-compatible server', () => {
  it('completes every round despite the faults', () => {
    expect(outcome.finished).toBe(true);
    expect(outcome.rows.map((r) => r.round)).toEqual([1, 2]);
  });

  it('records each fault once as a failed try of the request that met it, and a retry', () => {
    const failed = ofType('ModelRequestFailed');
    expect(failed.map((f) => f.kind).sort()).toEqual(['empty-choices', 'http-status', 'malformed-json', 'timeout', 'wrong-n']);
    expect(failed.every((f) => f.retrying === true)).toBe(true);
    // Each failing request was answered in the end: its samples are recorded.
    const answered = new Set(ofType('ModelSampled').map((s) => s.requestId));
    for (const f of failed) expect(answered.has(f.requestId as string)).toBe(true);
  });

  it('records every sample exactly once, with its prompt, template, tokens and parse outcome', () => {
    const sampled = ofType('ModelSampled');
    const ids = [...ofType('SolutionSampled').map((s) => s.solutionId), ...ofType('TestsSampled').map((s) => s.suiteId)];
    expect(sampled.map((s) => s.sampleId).sort()).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(2 * 3 * 4 * (1 + 2));
    expect(new Set(sampled.map((s) => `${(s.template as { id: string }).id}`))).toEqual(new Set(['solve', 'attack-white-box']));
    expect(sampled.every((s) => s.tokensHash !== null && (s.served as { fingerprint: string }).fingerprint === 'v0')).toBe(true);
    const code = sampled.filter((s) => s.role === 'code').map((s) => (s.parse as { form: string }).form);
    expect(code.filter((f) => f === 'fenced').length).toBe(18);
    expect(code.filter((f) => f === 'bare').length).toBe(6);
    const tests = sampled.filter((s) => s.role === 'test').map((s) => s.parse as { status: string; usable: number });
    expect(tests.every((t) => t.status === 'partial' && t.usable >= 2)).toBe(true);
  });

  it('the sandbox judged what was read: correct programs pass held-out tests, the unreadable test is malformed', () => {
    for (const r of outcome.rows) expect(r.heldOutPass).toBeCloseTo(0.5, 5);
    const suites = ofType('TestsSampled') as { tests: { wellFormed: boolean }[] }[];
    expect(suites.every((s) => s.tests.at(-1)!.wellFormed === false && s.tests.slice(0, -1).every((t) => t.wellFormed))).toBe(true);
  });

  it('frozen steps are recorded and change nothing', () => {
    const steps = ofType('TrainingStepCompleted');
    expect(steps).toHaveLength(4);
    expect(steps.every((s) => (s.metrics as { applied: number }).applied === 0)).toBe(true);
  });

  it('replay --verify passes on the log', async () => {
    const { code, out } = await runCli(['replay', outcome.dir, '--verify', '--json']);
    expect(code).toBe(0);
    expect((JSON.parse(out) as { verified: boolean }).verified).toBe(true);
  });
});
