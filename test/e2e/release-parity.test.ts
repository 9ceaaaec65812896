/**
 * Parity with the released reward code through the live pipeline: whole rounds of Code-A1 and
 * CURE on the real SQLite log and the real sandbox, sampled over HTTP from a stand-in for a model
 * server (StandInOpenAIServer) whose answers are designed: programs with known bugs, and test
 * responses with wrong stated values, malformed lines inside and outside code blocks, more than
 * eight tests, repeated and corrected duplicates. Every recorded reward component and Mistake
 * Book change is compared with values worked by hand from the release's rules (Code-A1
 * code/rl/reward.py and trainer_a1.py at be86d93; CURE optimization/reward.py at 69fe174).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { runExperiment } from '../../src/actors/run.js';
import { ServedBackend } from '../../src/actors/served-backend.js';
import { Problem } from '../../src/core/problem.js';
import { requestPairs, reusedPairs, type EventData } from '../../src/events/catalog.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { StandInOpenAIServer } from '../support/stand-in-openai-server.js';
import { recordedBlobs, recordedEvents } from '../support/run-log.js';
import Database from 'better-sqlite3';
import { deriveSeed } from '../../src/core/rng.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { ablate } from '../../src/ablation/ablate.js';
import { parseVariantSpec } from '../../src/ablation/variant.js';

// ---------------------------------------------------------------------------------------------
// The designed problem, programs and answers

const REFERENCE = 'def f(x):\n    if x < 0:\n        raise ValueError("negative")\n    return 2 * x\n';
const PROBLEM = Problem.parse({
  id: 'parity/double',
  source: 'parity',
  statement: 'Write f(x) that returns twice the integer x, and raises ValueError for a negative x.',
  style: 'assert',
  entryPoint: 'f',
  tests: {
    public: [
      { style: 'assert', code: 'assert f(1) == 2' },
      { style: 'assert', code: 'assert f(3) == 6' },
      { style: 'assert', code: 'assert f(6) == 12' },
    ],
    private: [
      { style: 'assert', code: 'assert f(0) == 0' },
      { style: 'assert', code: 'assert f(21) == 42' },
    ],
    generated: [],
  },
  solutions: [REFERENCE],
  incorrectSolutions: [],
  limits: { timeSeconds: 2, memoryMb: 256 },
});

/** The code policy's G = 4 answers, in sample order. */
const PROGRAMS = {
  /** s0: correct. */
  right: REFERENCE,
  /** s1: one too many from 5 on. */
  offFromFive: 'def f(x):\n    if x < 0:\n        raise ValueError("negative")\n    return 2 * x + (1 if x >= 5 else 0)\n',
  /** s2: its module body raises: not a valid program. */
  broken: 'raise RuntimeError("import failed")\n\ndef f(x):\n    return 2 * x\n',
  /** s3: wrong on 3 only. */
  wrongOnThree: 'def f(x):\n    if x < 0:\n        raise ValueError("negative")\n    return 0 if x == 3 else 2 * x\n',
};
const CODE_ANSWERS = Object.values(PROGRAMS).map((p) => `Here is my solution:\n\`\`\`python\n${p}\`\`\`\n`);

/** Suite t0 of every program: a ```python block of 11 tests (and 3 asserts that are not tests). */
const SUITE_FENCED = [
  'Here are my tests:',
  '```python',
  'assert f(1) == 2',
  'assert f(2) == 5',
  'assert f(3) == 6',
  'assert f(2) == 4',
  'assert f(-1) == 0',
  'assert f(5) == 10',
  'assert f(6) == 12',
  'assert f(7) == 14',
  'assert f(8) == 16',
  'assert f(9) == 18',
  'assert f(3)',
  'assert f(4) != 9',
  'x = 10',
  'assert f(x) == 20',
  '```',
].join('\n');

/** Suite t1: bare lines (no code block), three malformed, and one character outside Python's
 * string.printable (the em dash). */
const SUITE_BARE = [
  'Tests for f \u2014 edge cases:',
  'assert f(4) == 8',
  'assert f(4) == 8',
  'assert f(0) == 1',
  'assert f(',
  'assert f(11)',
  'assert f(12) == 24',
  'asserting f works',
  'assert f(13) == 26',
].join('\n');

// ---------------------------------------------------------------------------------------------
// CURE: black-box, one test per answer (the release's unit), two problems

/** `text` padded with trailing prose to exactly `bytes` bytes: response lengths in tokens are
 * bytes here (the stand-in server returns one token per byte), chosen round for hand work. */
const padded = (text: string, bytes: number) => `${text}\n${'x'.repeat(bytes - text.length - 1)}`;
const codeAnswer = (program: string, i: number) => padded(`Here is my solution:\n\`\`\`python\n${program}\`\`\``, 200 + 100 * i);
const testAnswer = (line: string, k: number) => padded(`\`\`\`python\n${line}\n\`\`\``, 100 + 10 * k);

const TRIPLE = Problem.parse({
  id: 'parity/triple',
  source: 'parity',
  statement: 'Write g(x) that returns three times the integer x.',
  style: 'assert',
  entryPoint: 'g',
  tests: {
    public: [
      { style: 'assert', code: 'assert g(1) == 3' },
      { style: 'assert', code: 'assert g(2) == 6' },
    ],
    private: [{ style: 'assert', code: 'assert g(5) == 15' }],
    generated: [],
  },
  solutions: ['def g(x):\n    return 3 * x\n'],
  incorrectSolutions: [],
  limits: { timeSeconds: 2, memoryMb: 256 },
});

/** Each problem's code answers (by sample index) and its eight one-test answers: program i's
 * two black-box samples are tests 2i and 2i + 1, told apart by the seed of its request. */
const CURE_PROBLEMS = [
  {
    // The double problem under its own id and wording (the stand-in routes by statement).
    problem: { ...PROBLEM, id: 'parity/double-cure', statement: `${PROBLEM.statement} (CURE)` },
    programs: Object.values(PROGRAMS).map(codeAnswer),
    tests: [
      'assert f(5) == 10',
      'assert f(3) == 6',
      'assert f(2) == 5',
      'assert f(7) == 15',
      'assert f(1) == 2',
      'assert f(8) == 16',
      'assert f(-1) == 0',
      'assert f(3) == 0',
    ],
  },
  {
    problem: TRIPLE,
    // Four correct programs (every code reward 1).
    programs: [
      'def g(x):\n    return 3 * x\n',
      'def g(x):\n    return x * 3\n',
      'def g(x):\n    return x + x + x\n',
      'def g(x):\n    y = 3 * x\n    return y\n',
    ].map(codeAnswer),
    tests: [
      'assert g(3) == 9',
      'assert g(4) == 12',
      'assert g(5) == 14',
      'assert g(0) == 0',
      'assert g(-2) == -6',
      'assert g(10) == 31',
      'assert g(7) == 21',
      'assert g(1) == 3',
    ],
  },
].map((c) => ({
  ...c,
  testsFor(seed: number | null): string[] {
    const i = [0, 1, 2, 3].find((k) => deriveSeed(CURE_SEED, 'adversary', '1', `1/${c.problem.id}/s${k}`) === seed);
    if (i === undefined) throw new Error(`no program of ${c.problem.id} asks with seed ${seed}`);
    return [testAnswer(c.tests[2 * i]!, 2 * i), testAnswer(c.tests[2 * i + 1]!, 2 * i + 1)];
  },
}));
const CURE_SEED = 2;

let root: string;
let server: StandInOpenAIServer;

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-parity-'));
  server = await StandInOpenAIServer.start(({ prompt, n, seed }) => {
    const cure = CURE_PROBLEMS.find((c) => prompt.includes(c.problem.statement));
    if (cure) return prompt.startsWith('Solve') ? cure.programs.slice(0, n) : cure.testsFor(seed).slice(0, n);
    if (prompt.startsWith('Solve')) return CODE_ANSWERS.slice(0, n);
    return [SUITE_FENCED, SUITE_BARE].slice(0, n);
  });
});

afterAll(async () => {
  await server?.close();
  rmSync(root, { recursive: true, force: true });
});

const openai = () => ({ baseUrl: server.baseUrl, model: 'stand-in', concurrency: 2, timeoutMs: 5000, maxTokens: 512, retry: { attempts: 2, baseDelayMs: 10 } });

async function run(name: string, overrides: Record<string, unknown>, problems: Problem[] = [PROBLEM]) {
  const config = parseConfig({
    name,
    method: 'code-a1',
    seed: 1,
    rounds: 2,
    dir: root,
    dataset: { format: 'demo' },
    sampling: { problemsPerRound: problems.length, groupSize: 4, suitesPerProgram: 2, suiteSize: 8, whiteBox: true },
    policies: { code: { backend: 'openai', openai: openai() }, test: { backend: 'openai', openai: openai() } },
    // The release's Mistake Book: no cap, no decay, no blacklist.
    mistakeBook: { enabled: true, replay: 8, cap: null, decay: 0, blacklist: false },
    learner: { control: 'frozen' },
    ...overrides,
  });
  const dir = path.join(root, name);
  const out = await runExperiment({ config, dir, prepared: { problems, backend: new ServedBackend(config, problems, dir), catalogHash: null } });
  expect(out.finished).toBe(true);
  const events = await recordedEvents(out.dir);
  return { dir: out.dir, events, of: <T extends DataType>(type: T) => dataOf(events, type) };
}

type DataType = 'RewardsAssigned' | 'MistakeBookUpdated' | 'TestsJudged' | 'TestsSampled' | 'ProblemEvaluated' | 'ModelSampled';
function dataOf<T extends DataType>(events: EventEnvelope[], type: T): EventData<T>[] {
  return events.filter((e) => e.type === type).map((e) => e.data as EventData<T>);
}

/** verl's GRPO advantages of one group (compute_grpo_outcome_advantage): a lone sample with
 * mean 0 and std 1, else the sample std; eps 1e-6. */
function verlGrpo(rewards: number[]): number[] {
  if (rewards.length === 1) return [rewards[0]! / (1 + 1e-6)];
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (rewards.length - 1));
  if (std === 0) return rewards.map(() => 0); // crucible's choice for an all-equal group (verl divides a residue by eps)
  return rewards.map((r) => (r - mean) / (std + 1e-6));
}

/**
 * One (program, suite) of Code-A1 as compute_dual_model_reward computes it, from counts worked
 * by hand: |valid_t|, invalid_t, passes among the usable tests, failures among the first 8, and
 * the Mistake Book replay's passes (null: no replay).
 */
function releaseSuite(c: {
  valid: number;
  invalid: number;
  passed: number;
  failedInFirst8: number;
  hist: [passed: number, total: number] | null;
  programValid: boolean;
  nonprintable: number;
}) {
  const validRatio = Math.max(0, Math.min(1, c.valid / 8, 1 - c.invalid / 8));
  const genPass = c.valid > 0 ? c.passed / c.valid : 0;
  const genFail = c.failedInFirst8 / 8;
  const histPass = c.hist ? c.hist[0] / c.hist[1] : 0;
  const histFail = c.hist ? (c.hist[1] - c.hist[0]) / c.hist[1] : 0;
  let pass = 0;
  let attack = 0;
  if (c.hist && c.valid > 0) {
    pass = (histPass + genPass) / 2;
    attack = (genFail - histFail + 1) / 2;
  } else if (c.hist) pass = histPass;
  else if (c.valid > 0) {
    pass = genPass;
    attack = genFail;
  }
  const reward = -c.nonprintable + (c.programValid ? validRatio * 0.5 + attack * 0.5 : 0);
  return { reward, components: { validRatio, genPass, genFail, histPass, histFail, pass, attack, nonprintableRatio: c.nonprintable } };
}

/** Python's string.printable: the share of the response's characters outside it. */
const nonprintable = (text: string) => [...text].filter((ch) => !/^[\x20-\x7e\t\n\r\x0b\x0c]$/.test(ch)).length / [...text].length;

// What each program does on each suite, worked by hand from the designed answers.
//   t0 (code block): 11 tests; usable in order f(1)=2, f(2)=4 (stated 5: corrected), f(3)=6,
//     f(5)=10 ... f(10)=20 (x substituted): 9; invalid: the correction, f(2) == 4 (a duplicate
//     of the corrected statement), f(-1) (the reference raises): 3. `assert f(3)` and
//     `assert f(4) != 9` are not tests (dropped, not counted).
//   t1 (bare lines): 8 tests; usable f(4)=8, f(0)=0 (stated 1: corrected), f(12)=24, f(13)=26:
//     4; invalid: the repeated f(4), the correction, three malformed lines: 5.
// offFromFive fails f(5) ... f(10) (6 of t0's 9; 5 of the first 8) and f(12), f(13);
// wrongOnThree fails f(3); broken's module body raises: every cell fails, and it is invalid.
const SUITES = { t0: { valid: 9, invalid: 3 }, t1: { valid: 4, invalid: 5 } } as const;
const FAILS: Record<string, { t0: [passed: number, failedInFirst8: number]; t1: [number, number] }> = {
  s0: { t0: [9, 0], t1: [4, 0] },
  s1: { t0: [3, 5], t1: [2, 2] },
  s2: { t0: [0, 8], t1: [0, 4] },
  s3: { t0: [8, 1], t1: [4, 0] },
};
/** Round 2 replays the book's top 8 after round 1 (see the Mistake Book test): offFromFive
 * fails all 8 and broken fails them; the others pass them all (wrongOnThree's f(3) is the 9th). */
const HIST: Record<string, [number, number]> = { s0: [8, 8], s1: [0, 8], s2: [0, 8], s3: [8, 8] };
const VALID: Record<string, boolean> = { s0: true, s1: true, s2: false, s3: true };

describe('Code-A1 through the live pipeline', () => {
  let r: Awaited<ReturnType<typeof run>>;
  beforeAll(async () => {
    r = await run('code-a1', {});
  }, 300_000);

  it('reads every test of an answer as the release does (no cap at 8; code block and bare lines)', () => {
    const suites = r.of('TestsSampled').filter((s) => s.round === 1);
    expect(suites).toHaveLength(8);
    for (const s of suites) {
      const wellFormed = s.tests.map((t) => t.wellFormed);
      if (s.suiteId.endsWith('/t0')) expect(wellFormed).toEqual(Array.from({ length: 11 }, () => true));
      else expect(wellFormed).toEqual([true, true, true, false, false, true, false, true]);
    }
    const reads = r.of('ModelSampled').filter((m) => m.role === 'test' && m.sampleId.startsWith('1/'));
    expect(reads.find((m) => m.sampleId.endsWith('/t0'))!.parse).toMatchObject({ form: 'fenced-asserts', found: 11, usable: 11 });
    // `assert f(4) != 9`: the release would read it as `assert f(4) == 9`; crucible does not.
    expect(reads.find((m) => m.sampleId.endsWith('/t0'))!.parse.detail).toContain('2 asserts in the code block not read as tests');
    expect(reads.find((m) => m.sampleId.endsWith('/t1'))!.parse).toMatchObject({ form: 'bare-asserts', found: 8, usable: 5 });
  });

  it("the Judge corrects assert tests with the reference's output; duplicates are found on the corrected statement", async () => {
    const judged = r.of('TestsJudged').find((j) => j.round === 1)!.tests;
    const t0 = judged.filter((t) => t.testId.startsWith('1/parity/double/s0/t0/'));
    expect(t0.map((t) => t.reason)).toEqual(['ok', 'expected-mismatch', 'ok', 'duplicate', 'reference-raises', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok']);
    const t1 = judged.filter((t) => t.testId.startsWith('1/parity/double/s0/t1/'));
    expect(t1.map((t) => t.reason)).toEqual(['ok', 'duplicate', 'expected-mismatch', 'malformed', 'malformed', 'ok', 'malformed', 'ok']);
    const blobs = await recordedBlobs(r.dir, [t0[1]!.oracleHash!, t0[10]!.oracleHash!, t1[2]!.oracleHash!]);
    // Stated 5 and 1: the oracle is the reference's output, as the release's statement writes it.
    expect(JSON.parse(blobs.get(t0[1]!.oracleHash!)!)).toEqual({ style: 'assert', code: 'assert f(2) == 4' });
    expect(JSON.parse(blobs.get(t1[2]!.oracleHash!)!)).toEqual({ style: 'assert', code: 'assert f(0) == 0' });
    // The name assigned in the block is substituted into the call.
    expect(JSON.parse(blobs.get(t0[10]!.oracleHash!)!)).toEqual({ style: 'assert', code: 'assert f(10) == 20' });
    for (const p of r.of('ProblemEvaluated')) expect(p.tests).toEqual({ sampled: 4 * (11 + 8), wellFormed: 4 * (11 + 5), valid: 4 * (9 + 4) });
  });

  it("every recorded reward component of both rounds equals the release's", () => {
    for (const round of [1, 2]) {
      const expected = ['s0', 's1', 's2', 's3'].map((s) =>
        (['t0', 't1'] as const).map((t) => {
          const [passed, failedInFirst8] = FAILS[s]![t];
          const text = t === 't0' ? SUITE_FENCED : SUITE_BARE;
          return releaseSuite({
            ...SUITES[t],
            passed,
            failedInFirst8,
            hist: round === 2 ? HIST[s]! : null,
            programValid: VALID[s]!,
            nonprintable: nonprintable(text),
          });
        }),
      );
      const tests = r.of('RewardsAssigned').find((x) => x.round === round && x.role === 'test')!;
      expect(tests.rewardFn).toBe('code-a1/v1');
      // TOPVAR: offFromFive's two suites vary most (population std of its R_test).
      const selected = ['s1'];
      expect(tests.items.map((i) => i.sampleId)).toEqual(
        ['s0', 's1', 's2', 's3'].flatMap((s) => [`${round}/parity/double/${s}/t0`, `${round}/parity/double/${s}/t1`]),
      );
      tests.items.forEach((item, k) => {
        const e = expected[Math.floor(k / 2)]![k % 2]!;
        const program = `s${Math.floor(k / 2)}`;
        expect(item.components).toEqual({ ...e.components, selected: selected.includes(program) ? 1 : 0 });
        expect(item.reward).toBeCloseTo(e.reward, 15);
        // White-box: a program's suites are one GRPO group.
        expect(item.advantage).toBeCloseTo(verlGrpo(expected[Math.floor(k / 2)]!.map((x) => x.reward))[k % 2]!, 12);
      });
      const code = r.of('RewardsAssigned').find((x) => x.round === round && x.role === 'code')!;
      const rCode = expected.map((suites) => (suites[0]!.components.pass + suites[1]!.components.pass) / 2);
      const adv = verlGrpo(rCode);
      code.items.forEach((item, i) => {
        expect(item.reward).toBeCloseTo(rCode[i]!, 15);
        expect(item.advantage).toBeCloseTo(adv[i]!, 12);
        expect(item.components).toEqual({
          programValid: VALID[`s${i}`] ? 1 : 0,
          genPass: (expected[i]![0]!.components.genPass + expected[i]![1]!.components.genPass) / 2,
          histPass: round === 2 ? HIST[`s${i}`]![0] / 8 : 0,
          selected: 1,
        });
      });
    }
  });

  it("Mistake Book: new tests in first-failure order; round 2 replays the release's top 8 of 9", async () => {
    const updates = r.of('MistakeBookUpdated');
    const texts = await recordedBlobs(
      r.dir,
      updates.flatMap((u) => u.changes.map((c) => c.testHash)),
    );
    const call = (c: { testHash: string }) => /assert (f\(\d+\)) ==/.exec((JSON.parse(texts.get(c.testHash)!) as { code: string }).code)![1];
    const show = (u: (typeof updates)[number]) => u.changes.map((c) => [call(c), c.cause, c.delta, c.count]);
    // Round 1: offFromFive fails f(5) ... f(10) in t0, then f(12), f(13) in t1; wrongOnThree then
    // fails f(3) (programs in order, then suites, then tests). Nine tests: key order would rank
    // f(10), f(12), f(13), f(3) first.
    const first = ['f(5)', 'f(6)', 'f(7)', 'f(8)', 'f(9)', 'f(10)', 'f(12)', 'f(13)', 'f(3)'];
    expect(show(updates.find((u) => u.round === 1)!)).toEqual(first.map((k) => [k, 'fail', 1, 1]));
    // Round 2 replays the first 8 (all count 1, stored order): f(3) is not replayed. right and
    // wrongOnThree pass all 8 (removed at 0); then the round's failures again, in order; f(3),
    // never removed, counts 2.
    const replayed = first.slice(0, 8);
    const request = r.events.find((e) => e.type === 'ExecutionRequested' && (e.data as EventData<'ExecutionRequested'>).requestId === '2/parity/double/reward')!
      .data as EventData<'ExecutionRequested'>;
    const replayHashes = [
      ...new Set([...requestPairs(request), ...reusedPairs(request)].filter((p) => p.testId.startsWith('mistake-book/')).map((p) => p.testHash)),
    ];
    // The replayed tests, in the order they are replayed (the book's top 8).
    expect(replayHashes.map((h) => call({ testHash: h }))).toEqual(replayed);
    const u2 = show(updates.find((u) => u.round === 2)!);
    expect(
      u2
        .filter((c) => c[1] === 'pass')
        .map((c) => c[0])
        .sort(),
    ).toEqual([...replayed].sort());
    expect(u2.filter((c) => c[1] === 'pass').every((c) => c[2] === -1 && c[3] === 0)).toBe(true);
    expect(u2.filter((c) => c[1] === 'fail')).toEqual([...first.slice(0, 8).map((k) => [k, 'fail', 1, 1]), ['f(3)', 'fail', 1, 2]]);
  });
});

describe('Code-A1: a GRPO group of one sample (one suite per program)', () => {
  it("gets verl's advantage: its reward over 1 + 1e-6", async () => {
    const r = await run('code-a1-one', { rounds: 1, sampling: { problemsPerRound: 1, groupSize: 4, suitesPerProgram: 1, suiteSize: 8, whiteBox: true } });
    const tests = r.of('RewardsAssigned').find((x) => x.role === 'test')!;
    expect(tests.items).toHaveLength(4);
    for (const [i, item] of tests.items.entries()) {
      const [passed, failedInFirst8] = FAILS[`s${i}`]!.t0;
      const e = releaseSuite({ ...SUITES.t0, passed, failedInFirst8, hist: null, programValid: VALID[`s${i}`]!, nonprintable: 0 });
      expect(item.reward).toBeCloseTo(e.reward, 15);
      expect(item.advantage).toBe(item.reward / (1 + 1e-6));
    }
    expect(tests.items.some((i) => i.reward !== 0)).toBe(true);
  }, 300_000);
});

// ---------------------------------------------------------------------------------------------
// CURE

async function runCure(name: string, cure: Record<string, unknown>) {
  const problems = CURE_PROBLEMS.map((c) => c.problem);
  return run(
    name,
    {
      method: 'cure',
      seed: CURE_SEED,
      rounds: 1,
      sampling: { problemsPerRound: 2, groupSize: 4, suitesPerProgram: 2, suiteSize: 1, whiteBox: false },
      mistakeBook: { enabled: false },
      selection: { testSamples: 'all' },
      cure,
    },
    problems,
  );
}

/** The release's normalize_reward (population std, no epsilon; dropped: null). numpy sums
 * pairwise: for 4 values that is left to right, for 8 ((a+b)+(c+d))+((e+f)+(g+h)). */
const npSum = (x: number[]) => (x.length === 8 ? x[0]! + x[1]! + (x[2]! + x[3]!) + (x[4]! + x[5]! + (x[6]! + x[7]!)) : x.reduce((a, b) => a + b, 0));
function normalizeReward(x: number[]): number[] | null {
  const mean = npSum(x) / x.length;
  const std = Math.sqrt(npSum(x.map((v) => (v - mean) ** 2)) / x.length);
  return std === 0 ? null : x.map((v) => (v - mean) / std);
}
/** x / its population std (normalize_balance_std's last step, numpy order). */
const overStd = (x: number[]) => {
  const mean = npSum(x) / x.length;
  const std = Math.sqrt(npSum(x.map((v) => (v - mean) ** 2)) / x.length);
  return x.map((v) => v / std);
};

// By hand, from the designed programs: on double, only `right` passes the three GT tests
// (offFromFive fails f(6), wrongOnThree f(3), broken all): code rewards 1, 2/3, 0, 2/3. Each test
// against the correct program and the three incorrect ones (failing / passing):
//   f(5)==10: right passes; 2 of 3 incorrect fail: +2/3     f(3)==6: +2/3 (broken, wrongOnThree fail)
//   f(2)==5: right fails; no incorrect passes: 0           f(7)==15: right fails; offFromFive passes: -1/3
//   f(1)==2: +1/3 (only broken fails)                      f(8)==16: +2/3
//   f(-1)==0: right raises; none passes: 0                 f(3)==0: right fails; wrongOnThree passes: -1/3
// post_stage: +1 only if every incorrect program fails (none here), -1 if any passes.
// On triple every program is correct (code rewards all 1): a test earns its sign alone.
const DOUBLE_CODE = [1, 2 / 3, 0, 2 / 3];
const DOUBLE_TESTS = [2 / 3, 2 / 3, 0, -1 / 3, 1 / 3, 2 / 3, 0, -1 / 3];
const DOUBLE_TESTS_POST = [0, 0, 0, -1, 0, 0, 0, -1];
const TRIPLE_TESTS = [1, 1, -1, 1, 1, -1, 1, 1];

/** length_regularize by hand, with min_len_threshold 0 (lengths: code answers 200 + 100 i bytes,
 * test answers 100 + 10 k):
 * - double's codes: z-scores of (1, 2/3, 0, 2/3) are +, +, -, +; positive lengths 200, 300, 500:
 *   median 300; regularized 100, 0, and -200 for 500; the negative one gets min(100, 0, 0, -200)
 *   = -200; positives (100) scaled by 400 / 100 = 4: (400, 0, -200, -200) over its std.
 * - triple's codes (all 1, kept by enable_efficient): all positive, median 350: 150, 50, -50,
 *   -150, already balanced (scale 1).
 * - double's tests under post_stage: (0 x 3, -1, 0 x 3, -1) z-scores + + + - + + + -; positive
 *   lengths 100, 110, 120, 140, 150, 160: median 130: 30, 20, 10, -10, -20, -30; the negatives
 *   get -30; positives (60) scaled by 120 / 60 = 2.
 * - double's tests without it: + + - - + + - -; positive lengths 100, 110, 140, 150: median 125:
 *   25, 15, -15, -25; the negatives get -25; positives (40) scaled by 140 / 40 = 3.5.
 * - triple's tests: + + - + + - + +; positive lengths 100, 110, 130, 140, 160, 170: median 135:
 *   35, 25, 5, -5, -25, -35; the negatives get -35; positives (65) scaled by 135 / 65.
 */
const LENGTH = {
  doubleCode: overStd([400, 0, -200, -200]),
  tripleCode: overStd([150, 50, -50, -150]),
  doubleTestsPost: overStd([60, 40, 20, -30, -10, -20, -30, -30]),
  doubleTests: overStd([87.5, 52.5, -25, -25, -15, -25, -25, -25]),
  tripleTests: overStd([35, 25, -35, 5, -5, -35, -25, -35].map((v) => (v > 0 ? (v * 135) / 65 : v))),
};

interface Expected {
  code: { reward: number[]; advantage: number[] | null };
  tests: { reward: number[]; advantage: number[] | null };
}
/** Per problem (double, triple): the expected rewards and advantages (null: dropped). */
function expectedCure(o: { postStage: boolean; efficient: boolean; regularize: boolean }): [Expected, Expected] {
  const doubleTests = o.postStage ? DOUBLE_TESTS_POST : DOUBLE_TESTS;
  return [
    {
      code: { reward: DOUBLE_CODE, advantage: o.regularize ? LENGTH.doubleCode : normalizeReward(DOUBLE_CODE) },
      tests: { reward: doubleTests, advantage: o.regularize ? (o.postStage ? LENGTH.doubleTestsPost : LENGTH.doubleTests) : normalizeReward(doubleTests) },
    },
    {
      // All ones: dropped, unless enable_efficient keeps them (then length-regularized).
      code: { reward: [1, 1, 1, 1], advantage: o.efficient ? LENGTH.tripleCode : null },
      tests: { reward: TRIPLE_TESTS, advantage: o.regularize ? LENGTH.tripleTests : normalizeReward(TRIPLE_TESTS) },
    },
  ];
}

interface Row {
  sample_id: string;
  role: string;
  problem_id: string;
  reward_fn: string;
  reward: number;
  advantage: number;
  components: Record<string, number>;
}

function checkCure(rows: Row[], o: { postStage: boolean; efficient: boolean; regularize: boolean }) {
  const expected = expectedCure(o);
  CURE_PROBLEMS.forEach((c, p) => {
    for (const role of ['code', 'test'] as const) {
      const items = rows.filter((r) => r.problem_id === c.problem.id && r.role === role).sort((a, b) => (a.sample_id < b.sample_id ? -1 : 1));
      const e = role === 'code' ? expected[p]!.code : expected[p]!.tests;
      expect(items).toHaveLength(role === 'code' ? 4 : 8);
      expect(new Set(items.map((i) => i.reward_fn))).toEqual(new Set([o.postStage ? 'cure-post-stage/v1' : 'cure/v1']));
      items.forEach((item, k) => {
        expect(item.reward).toBeCloseTo(e.reward[k]!, 15);
        if (e.advantage === null) expect(item.advantage).toBe(0);
        else expect(item.advantage).toBeCloseTo(e.advantage[k]!, 12);
        expect(item.components.selected).toBe(e.advantage === null ? 0 : 1);
      });
    }
  });
}

const rowsOf = (events: ReturnType<typeof dataOf<'RewardsAssigned'>>): Row[] =>
  events.flatMap((r) =>
    r.items.map((i) => ({
      sample_id: i.sampleId,
      role: r.role,
      problem_id: r.problemId,
      reward_fn: r.rewardFn,
      reward: i.reward,
      advantage: i.advantage,
      components: i.components,
    })),
  );

describe('CURE through the live pipeline', () => {
  let plain: Awaited<ReturnType<typeof run>>;
  beforeAll(async () => {
    plain = await runCure('cure', {});
  }, 300_000);

  it("the release's defaults: every reward and advantage as worked by hand; all-equal groups dropped", () => {
    const rows = rowsOf(plain.of('RewardsAssigned'));
    // Sample ids sort as s0/t0, s0/t1, s1/t0, ...: the tests in designed order.
    checkCure(rows, { postStage: false, efficient: false, regularize: false });
    const double = rows.filter((r) => r.problem_id === 'parity/double-cure' && r.role === 'code').sort((a, b) => (a.sample_id < b.sample_id ? -1 : 1));
    expect(double.map((r) => [r.components.correct, r.components.gtPassed, r.components.gtObserved])).toEqual([
      [1, 3, 3],
      [0, 2, 3],
      [0, 0, 3],
      [0, 2, 3],
    ]);
  });

  it("post_stage and enable_efficient switched on in a run: the release's arithmetic, lengths from the recorded tokens", async () => {
    const on = await runCure('cure-switches', { postStage: true, enableEfficient: true, minLenThreshold: 0 });
    checkCure(rowsOf(on.of('RewardsAssigned')), { postStage: true, efficient: true, regularize: true });
    // The samples are the same as the plain run's: the switches change only the Judge's arithmetic.
    expect(on.of('TestsSampled').map((t) => t.tests.map((x) => x.testHash))).toEqual(plain.of('TestsSampled').map((t) => t.tests.map((x) => x.testHash)));
  }, 300_000);

  it('each switch is an ablation variant of the recorded run, answered by hand-worked values', async () => {
    const log = await openSqliteLog(path.join(plain.dir, 'log.db'), { create: false });
    try {
      const specs = [
        'post:cure.postStage=true',
        'eff:cure.enableEfficient=true,cure.minLenThreshold=0',
        'len:cure.lengthRegularize=true,cure.minLenThreshold=0',
        'none:cure.enableEfficient=true,cure.lengthRegularize=false',
      ];
      const result = await ablate({ log, dir: path.join(plain.dir, 'ablations'), variants: specs.map(parseVariantSpec) });
      const rowsOfVariant = (name: string): Row[] => {
        const v = result.variants.find((x) => x.name === name)!;
        if (v.status !== 'answered') throw new Error(`${name}: ${v.reason}`);
        const db = new Database(v.file, { readonly: true });
        try {
          return (
            db.prepare('SELECT sample_id, role, problem_id, reward_fn, reward, advantage, components FROM rewards').all() as (Omit<Row, 'components'> & {
              components: string;
            })[]
          ).map((r) => ({ ...r, components: JSON.parse(r.components) as Record<string, number> }));
        } finally {
          db.close();
        }
      };
      checkCure(rowsOfVariant('post'), { postStage: true, efficient: false, regularize: false });
      checkCure(rowsOfVariant('eff'), { postStage: false, efficient: true, regularize: true });
      // length_regularize alone: triple's all-ones code group is still dropped.
      checkCure(rowsOfVariant('len'), { postStage: false, efficient: false, regularize: true });
      // enable_efficient without length regularization: all-ones kept as they are (advantage 1).
      const none = rowsOfVariant('none').filter((r) => r.problem_id === 'parity/triple' && r.role === 'code');
      expect(none.map((r) => r.advantage)).toEqual([1, 1, 1, 1]);
    } finally {
      await log.close();
    }
  }, 300_000);
});
