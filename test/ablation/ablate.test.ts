/**
 * `crucible ablate` on a real small run (real SQLite log, real sandbox, real python): a variant
 * with the recorded settings rebuilds the live read models exactly; alpha=0 and alpha=1 move the
 * test rewards as Code-A1's formula says; mistakeBook.enabled=false removes every replay from the
 * rewards; refusals name the setting and why; a second call is answered from the variant's file.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smallConfig } from '../support/small-config.js';
import { runExperiment, type RunOutcome } from '../../src/actors/run.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import type { EventLog } from '../../src/events/log.js';
import { requestPairs, type EventData } from '../../src/events/catalog.js';
import type { RunConfig } from '../../src/config/schema.js';
import { sandboxOptions } from '../../src/actors/run.js';
import { createSandbox } from '../../src/sandbox/index.js';
import { runCli, runMain } from '../support/cli.js';
import type { RoundRow } from '../../src/projections/round-table.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { RUN_PROJECTIONS } from '../../src/projections/run-views.js';
import { positionAfterRound } from '../../src/projections/round-position.js';
import { ablate, type AblationResult, type VariantOutcome } from '../../src/ablation/ablate.js';
import { parseVariantSpec } from '../../src/ablation/variant.js';
import { RecordedAnswers, RecordedJudge } from '../../src/ablation/rejudge.js';
import { JUDGE_STREAM } from '../../src/core/judge-shares.js';
import { codeA1Basis } from '../../src/actors/judging.js';
import { emptyRecordedVerdicts, loadOf, observeVerdicts, VERDICT_EVENT_TYPES } from '../../src/projections/recorded-verdicts.js';
import { Problem } from '../../src/core/problem.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import { VariantRefusedError } from '../../src/ablation/errors.js';

const run = promisify(execFile);
const repo = path.resolve(__dirname, '../..');

let root: string;
let outcome: RunOutcome;
let log: EventLog;
let first: AblationResult;

const spec = (s: string) => parseVariantSpec(s);
const answered = (v: VariantOutcome | undefined) => {
  if (!v || v.status !== 'answered') throw new Error(`variant not answered: ${JSON.stringify(v)}`);
  return v;
};

interface RewardRow {
  sample_id: string;
  role: string;
  round: number;
  problem_id: string;
  reward: number;
  components: Record<string, number>;
}

function rewardsOf(file: string, role: 'code' | 'test'): Map<string, RewardRow> {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare('SELECT sample_id, role, round, problem_id, reward, components FROM rewards WHERE role = ?').all(role) as (Omit<
      RewardRow,
      'components'
    > & { components: string })[];
    return new Map(rows.map((r) => [r.sample_id, { ...r, components: JSON.parse(r.components) as Record<string, number> }]));
  } finally {
    db.close();
  }
}

/** sha256 of the run's log files (the log and its WAL), by name. */
function fileDigests(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir)
    .filter((n) => n.startsWith('log.db'))
    .sort()) {
    const file = path.join(dir, name);
    if (statSync(file).isFile()) out[name] = createHash('sha256').update(readFileSync(file)).digest('hex');
  }
  return out;
}

/** A black-box run (a program runs only the replayed tests, so a wider replay needs pairs the
 * run never executed), made once for the tests that need it. */
let blackboxRun: Promise<{ outcome: RunOutcome; log: EventLog }> | null = null;
const blackbox = () =>
  (blackboxRun ??= (async () => {
    const config = smallConfig(root, { name: 'blackbox' });
    const bb = await runExperiment({ config, dir: path.join(root, 'blackbox'), cacheDir: path.join(root, 'cache') });
    return { outcome: bb, log: await openSqliteLog(path.join(bb.dir, 'log.db'), { create: false }) };
  })());

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'crucible-ablate-'));
  // White-box with TOPVAR: each suite has one target program, whose validity the test reward reads.
  const config = smallConfig(root, {
    sampling: { problemsPerRound: 3, groupSize: 6, suitesPerProgram: 2, suiteSize: 4, whiteBox: true },
    selection: { testSamples: 'topvar' },
  });
  outcome = await runExperiment({ config, dir: path.join(root, 'run'), cacheDir: path.join(root, 'cache') });
  log = await openSqliteLog(path.join(outcome.dir, 'log.db'), { create: false });
  first = await ablate({
    log,
    dir: path.join(root, 'ablations'),
    variants: [spec('same:'), spec('a0:rewards.alpha=0'), spec('a1:rewards.alpha=1'), spec('nobook:mistakeBook.enabled=false')],
    hashes: true,
  });
}, 300_000);

afterAll(async () => {
  await log?.close();
  if (blackboxRun) await (await blackboxRun).log.close();
  rmSync(root, { recursive: true, force: true });
});

describe('crucible ablate', () => {
  it('a variant with the recorded settings reproduces the live read models state hashes exactly', async () => {
    expect(outcome.finished).toBe(true);
    const same = answered(first.variants.find((v) => v.name === 'same'));
    const live = await ProjectionRunner.open({ log, readModel: path.join(outcome.dir, 'views.db'), projections: RUN_PROJECTIONS, runId: outcome.runId });
    try {
      // Answer selection is built on demand, as a report builds it.
      await live.catchUp();
      // Every read model a variant projects (policy versions pass through untouched).
      const hashes = same.hashes!;
      expect(Object.keys(hashes).sort()).toEqual(['answer-selection', 'mistake-book', 'rewards', 'round-table']);
      for (const name of Object.keys(hashes)) expect({ [name]: hashes[name] }).toEqual({ [name]: await live.stateHash(name) });
    } finally {
      await live.close();
    }
    // The comparison can fail: a variant that changes the rewards has another rewards hash.
    expect(answered(first.variants.find((v) => v.name === 'a0')).hashes!.rewards).not.toBe(same.hashes!.rewards);
    expect(same.rows).toEqual(outcome.rows);
    expect(first.recorded).toEqual(outcome.rows);
    // Alpha leaves answer selection and the Mistake Book alone: built once for the three, with
    // the live hashes; the Mistake Book off plans other reward requests and builds its own, its
    // answer selection counting only the Mistake Book tallies beside the three's scores.
    expect(first.shared).toEqual([['same', 'a0', 'a1']]);
    expect(first.derivedSelection).toEqual([{ name: 'nobook', from: 'same' }]);
    for (const name of ['answer-selection', 'mistake-book'])
      expect(answered(first.variants.find((v) => v.name === 'a1')).hashes![name]).toBe(same.hashes![name]);
  });

  it('each variant file is whole under its own name when the call returns, in WAL mode, and nothing temporary is left', () => {
    // Files are synced and renamed while the next variant is built, and the shared base is removed.
    const files = first.variants.map((v) => path.basename(answered(v).file)).sort();
    // Beside each file, the settings it was built from (what `ablate --list` shows).
    expect(readdirSync(path.join(root, 'ablations')).sort()).toEqual([...files, ...files.map((f) => f.replace(/\.db$/, '.json'))].sort());
    const settings = JSON.parse(readFileSync(answered(first.variants[1]).file.replace(/\.db$/, '.json'), 'utf8')) as {
      name: string;
      overrides: unknown;
      sameAsRecorded: boolean;
    };
    expect(settings).toMatchObject({ name: 'a0', overrides: [{ key: 'rewards.alpha', value: 0 }], sameAsRecorded: false });
    for (const v of first.variants) {
      // Built with the journal in memory, then put back in WAL mode: opening it as a read model changes nothing.
      const db = new Database(answered(v).file, { readonly: true });
      try {
        expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      } finally {
        db.close();
      }
    }
  });

  it('alpha=0 and alpha=1 give each suite -nonprintable + [valid program] * attack, and * valid ratio', async () => {
    const recorded = rewardsOf(path.join(outcome.dir, 'views.db'), 'test');
    const recordedCode = rewardsOf(path.join(outcome.dir, 'views.db'), 'code');
    const a0 = rewardsOf(answered(first.variants.find((v) => v.name === 'a0')).file, 'test');
    const a1 = rewardsOf(answered(first.variants.find((v) => v.name === 'a1')).file, 'test');
    // Each suite's target program, from the log.
    const target = new Map<string, string>();
    for await (const e of log.read({}, { types: ['TestsSampled'] })) {
      const d = e.data as EventData<'TestsSampled'>;
      target.set(d.suiteId, d.targetSolutionId!);
    }
    // Suites where attack and valid ratio differ, so that alpha matters: check a few by hand.
    const suites = [...recorded.values()].filter((r) => Math.abs(r.components.attack! - r.components.validRatio!) > 0.1).slice(0, 6);
    expect(suites.length).toBeGreaterThan(2);
    for (const r of suites) {
      const c = r.components;
      const valid = recordedCode.get(target.get(r.sample_id)!)!.components.programValid!;
      expect(a0.get(r.sample_id)!.reward).toBeCloseTo(-c.nonprintableRatio! + valid * c.attack!, 12);
      expect(a1.get(r.sample_id)!.reward).toBeCloseTo(-c.nonprintableRatio! + valid * c.validRatio!, 12);
      // The recorded alpha (0.5) lies half way between.
      expect(r.reward).toBeCloseTo((a0.get(r.sample_id)!.reward + a1.get(r.sample_id)!.reward) / 2, 12);
      if (valid === 1) expect(a0.get(r.sample_id)!.reward).not.toBeCloseTo(a1.get(r.sample_id)!.reward, 6);
    }
    // What the policies and the clock did is the recorded run's in every variant.
    const fixed = (rows: RoundRow[]) => rows.map((r) => [r.round, r.exactCorrect, r.exactValid, r.trainedCorrect, r.trainedValid, r.seconds]);
    for (const v of first.variants) expect(fixed(answered(v).rows)).toEqual(fixed(outcome.rows));
    // Alpha weighs only the test reward: every code reward is the recorded one.
    const a0Code = rewardsOf(answered(first.variants.find((v) => v.name === 'a0')).file, 'code');
    for (const [id, r] of recordedCode) expect(a0Code.get(id)!.reward).toBe(r.reward);
  });

  it('mistakeBook.enabled=false removes every Mistake Book replay from the rewards', () => {
    const recorded = [...rewardsOf(path.join(outcome.dir, 'views.db'), 'test').values()];
    // The recorded run did replay Mistake Book tests (else this test could not fail).
    expect(recorded.some((r) => r.components.histPass! + r.components.histFail! === 1)).toBe(true);
    const nobook = answered(first.variants.find((v) => v.name === 'nobook'));
    const tests = [...rewardsOf(nobook.file, 'test').values()];
    expect(tests.length).toBe(recorded.length);
    for (const r of tests) {
      expect([r.components.histPass, r.components.histFail]).toEqual([0, 0]);
      expect(r.components.pass).toBe(r.components.genPass);
    }
    for (const r of rewardsOf(nobook.file, 'code').values()) expect(r.components.histPass).toBe(0);
    const db = new Database(nobook.file, { readonly: true });
    try {
      expect(db.prepare('SELECT count(*) AS n FROM mistake_book').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    expect(nobook.rows.every((r) => r.mistakeBook === 0)).toBe(true);
    // Round 1 has no book yet: its figures are the recorded ones; later rounds differ.
    expect(nobook.rows[0]).toEqual({ ...outcome.rows[0], mistakeBook: 0 });
    expect(nobook.rows.some((r, i) => r.codeReward !== outcome.rows[i]!.codeReward || r.testReward !== outcome.rows[i]!.testReward)).toBe(true);
  });

  it("the Mistake Book off answer selection, counted beside the recorded settings' scores, is the one projected alone", async () => {
    const nobook = answered(first.variants.find((v) => v.name === 'nobook'));
    const alone = await ablate({ log, dir: path.join(root, 'ablations-nobook-alone'), variants: [spec('nobook:mistakeBook.enabled=false')], hashes: true });
    expect(alone.derivedSelection).toEqual([]);
    expect(answered(alone.variants[0]).hashes).toEqual(nobook.hashes);
    // The comparison can fail: the Mistake Book tallies differ from the recorded settings' ones
    // (reused replays are not counted), the generated and held-out ones do not.
    const scores = (file: string) => {
      const db = new Database(file, { readonly: true });
      try {
        return (db.prepare('SELECT scores FROM answer_selection ORDER BY round, problem_id').all() as { scores: string }[]).map(
          (r) => JSON.parse(r.scores) as { generated: unknown; heldOut: unknown; book: { run: number } }[],
        );
      } finally {
        db.close();
      }
    };
    const [off, on] = [scores(nobook.file), scores(answered(first.variants.find((v) => v.name === 'same')).file)];
    expect(off.length).toBe(on.length);
    expect(off.map((p) => p.map((c) => [c.generated, c.heldOut]))).toEqual(on.map((p) => p.map((c) => [c.generated, c.heldOut])));
    const bookRuns = (ps: typeof off) => ps.flat().reduce((n, c) => n + c.book.run, 0);
    expect(bookRuns(off)).toBeLessThan(bookRuns(on));
  });

  it('the Mistake Book off execution matrix, derived from the recorded one, equals the one built from its own verdicts', async () => {
    // The recorded verdicts and the Judge's state folded over the log as a re-judgement folds them;
    // at each judgement, the recorded reward request's basis less its replays against a basis built
    // from scratch on the pairs a variant with the Mistake Book off asks for (no replayed test).
    const problems = new Map<string, Problem>();
    let started: EventEnvelope | null = null;
    for await (const e of log.read({ limit: 1 }, { runId: outcome.runId, types: ['RunStarted'] })) started = e;
    for (const ref of (started!.data as EventData<'RunStarted'>).problems)
      problems.set(ref.problemId, Problem.parse(JSON.parse(await log.blobs.getText(ref.problemHash))));
    const judge = new RecordedJudge();
    const verdictTypes = new Set<string>(VERDICT_EVENT_TYPES);
    const judged = new Set<string>();
    let verdicts = emptyRecordedVerdicts();
    let withReplays = 0;
    let rounds = 0;
    for await (const e of log.read({}, { runId: outcome.runId })) {
      if (verdictTypes.has(e.type)) verdicts = observeVerdicts(verdicts, e, () => true);
      const d = e.data as { round: number; problemId: string };
      if (e.stream === JUDGE_STREAM && e.type === 'RewardsAssigned' && !judged.has(`${d.round}/${d.problemId}`)) {
        judged.add(`${d.round}/${d.problemId}`);
        const p = judge.open(`${d.round}/${d.problemId}`);
        const answers = new RecordedAnswers(verdicts);
        const state = verdicts;
        const args = {
          blobs: log.blobs,
          problem: problems.get(p.problemId)!,
          round: p,
          verdicts: (id: string) => answers.of(id),
          load: (h: string) => loadOf(state, p.problemId, h),
        };
        const recorded = await codeA1Basis(args);
        const derived = recorded.withoutReplays();
        const scratch = await codeA1Basis({
          ...args,
          verdicts: (id: string) => (id === `${p.key}/reward` ? answers.of(id).filter((v) => !v.testId.startsWith('mistake-book/')) : answers.of(id)),
        });
        expect(derived.matrix).toEqual(scratch.matrix);
        expect(await derived.observations()).toEqual(await scratch.observations());
        expect(derived.figures).toEqual(scratch.figures);
        expect(derived.tests).toEqual(scratch.tests);
        if (recorded.matrix.tests.some((t) => t.suite === 'mistake-book')) {
          withReplays++;
          // The comparison can fail: the recorded matrix has the replayed columns.
          expect(recorded.matrix.tests.length).toBeGreaterThan(derived.matrix.tests.length);
        }
        rounds++;
      }
      judge.fold(e);
    }
    expect(rounds).toBeGreaterThan(0);
    expect(withReplays).toBeGreaterThan(0);
  });

  it('method=self-play rewards each suite with its program code reward; rewards.std changes advantages only', async () => {
    const more = await ablate({ log, dir: path.join(root, 'ablations'), variants: [spec('sp:method=self-play'), spec('pop:rewards.std=population')] });
    const recordedCode = rewardsOf(path.join(outcome.dir, 'views.db'), 'code');
    const target = new Map<string, string>();
    for await (const e of log.read({}, { types: ['TestsSampled'] })) {
      const d = e.data as EventData<'TestsSampled'>;
      target.set(d.suiteId, d.targetSolutionId!);
    }
    const sp = rewardsOf(answered(more.variants[0]).file, 'test');
    expect(sp.size).toBeGreaterThan(0);
    for (const [suite, r] of sp) expect(r.reward).toBe(recordedCode.get(target.get(suite)!)!.reward);
    const readAdvantages = (file: string) => {
      const db = new Database(file, { readonly: true });
      try {
        return db.prepare("SELECT sample_id, reward, advantage FROM rewards WHERE role = 'code' ORDER BY sample_id").all() as {
          sample_id: string;
          reward: number;
          advantage: number;
        }[];
      } finally {
        db.close();
      }
    };
    const recorded = readAdvantages(path.join(outcome.dir, 'views.db'));
    const pop = readAdvantages(answered(more.variants[1]).file);
    expect(pop.map((r) => r.reward)).toEqual(recorded.map((r) => r.reward));
    expect(pop.some((r, i) => Math.abs(r.advantage - recorded[i]!.advantage) > 1e-9)).toBe(true);
  });

  it('a second call is answered from the variant files without reading the log', async () => {
    const files = first.variants.map((v) => answered(v).file);
    const before = files.map((f) => statSync(f).mtimeMs);
    const again = await ablate({
      log,
      dir: path.join(root, 'ablations'),
      variants: [spec('same:'), spec('a0:rewards.alpha=0'), spec('a1:rewards.alpha=1'), spec('nobook:mistakeBook.enabled=false')],
    });
    expect(again.eventsRead).toBe(0);
    expect(again.variants.map((v) => answered(v).fromStore)).toEqual([true, true, true, true]);
    // State hashes only when asked for (they read every row).
    expect(again.variants.map((v) => answered(v).hashes)).toEqual([null, null, null, null]);
    expect(again.variants.map((v) => answered(v).rows)).toEqual(first.variants.map((v) => answered(v).rows));
    expect(files.map((f) => statSync(f).mtimeMs)).toEqual(before);
    // Projected on two threads: the same read models.
    const threaded = await ablate({
      log,
      dir: path.join(root, 'ablations-threads'),
      variants: [spec('a0:rewards.alpha=0'), spec('nobook:mistakeBook.enabled=false')],
      threads: 2,
      hashes: true,
    });
    expect(threaded.variants.map((v) => answered(v).hashes)).toEqual([answered(first.variants[1]).hashes, answered(first.variants[3]).hashes]);
    // What variants share when judged together (the recorded judgement basis, the Mistake Book
    // plan and updates of equal Mistake Book settings) leaves each one as it is alone.
    for (const [i, v] of ['same:', 'a1:rewards.alpha=1'].entries()) {
      const alone = await ablate({ log, dir: path.join(root, `ablations-alone-${i}`), variants: [spec(v)], hashes: true });
      expect(answered(alone.variants[0]).hashes).toEqual(answered(first.variants[i === 0 ? 0 : 2]).hashes);
    }
    // Another stop position is another file.
    const early = await ablate({
      log,
      dir: path.join(root, 'ablations'),
      variants: [spec('a0:rewards.alpha=0')],
      to: (await positionAfterRound(log, undefined, 3))!,
    });
    expect(answered(early.variants[0]).fromStore).toBe(false);
    expect(answered(early.variants[0]).file).not.toBe(answered(first.variants[1]).file);
  });

  it('refuses a variant the log cannot answer, naming the setting and why', async () => {
    const refusal = async (s: string) => {
      const err = await ablate({ log, dir: path.join(root, 'ablations'), variants: [spec(s)] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(VariantRefusedError);
      return err as VariantRefusedError;
    };
    const sampling = await refusal('g4:sampling.groupSize=4');
    expect(sampling.setting).toBe('sampling.groupSize');
    expect(sampling.message).toMatch(/^variant g4: sampling\.groupSize: cannot be answered from the log: sampling happens before the Judge/);
    expect((await refusal('s:seed=9')).reason).toMatch(/the seed drew the recorded samples/);
    expect((await refusal('l:policies.code.lr=2')).reason).toMatch(/the policies drew the recorded samples/);
    expect((await refusal('t:tcs.bufferSize=4')).reason).toBe('has no effect on the judgement of a code-a1 run');
    expect((await refusal('c:method=cure')).reason).toMatch(/cure judges other executions than code-a1/);
    expect((await refusal('typo:rewards.alpah=0.3')).setting).toBe('rewards.alpah');
    const range = await refusal('big:rewards.alpha=2');
    expect(range.setting).toBe('rewards.alpha');
  });

  it('refuses, mid-way and alone, a variant whose Mistake Book replays tests on programs that never ran them', async () => {
    const bb = await blackbox();
    const result = await ablate({
      log: bb.log,
      dir: path.join(root, 'ablations-bb'),
      variants: [spec('wide:mistakeBook.replay=64,mistakeBook.cap=null'), spec('narrow:mistakeBook.replay=1')],
    });
    const [wide, narrow] = result.variants;
    expect(wide?.status).toBe('refused');
    if (wide?.status !== 'refused') return;
    expect(wide.setting).toBe('mistakeBook.replay, mistakeBook.cap');
    expect(wide.reason).toMatch(
      /^needs \d+ verdict\(s\) the run never recorded \(round \d+, problem demo\/[a-z-]+: e\.g\. program \S+ on Mistake Book test [0-9a-f]{12}\); a variant answers only from recorded executions unless --execute runs the missing ones into its own log$/,
    );
    // The other variant of the same read is answered.
    expect(narrow?.status).toBe('answered');
    expect(answered(narrow).log).toBeNull();
  }, 300_000);

  it("--execute runs the missing executions in a real sandbox into the variant's own log, never the run's", async () => {
    const bb = await blackbox();
    const logFile = path.join(bb.outcome.dir, 'log.db');
    const before = fileDigests(bb.outcome.dir);
    const dir = path.join(root, 'ablations-exec');
    const execute = { sandbox: (config: RunConfig) => createSandbox(sandboxOptions(config)) };
    const wideSpec = () => spec('wide:mistakeBook.replay=64,mistakeBook.cap=null');
    const first = await ablate({ log: bb.log, dir, variants: [wideSpec(), spec('narrow:mistakeBook.replay=1')], execute, hashes: true });
    const [wide, narrow] = first.variants.map(answered);
    expect(wide!.executed).toBeGreaterThan(0);
    // A variant that needs no new execution runs none and has no log of its own.
    expect([narrow!.executed, narrow!.log]).toEqual([0, null]);
    // The variant's log holds the new executions: Mistake Book tests on the run's programs.
    const own = await openSqliteLog(wide!.log!, { create: false });
    let pairs = 0;
    let results = 0;
    try {
      for await (const e of own.read({}, {})) {
        expect(e.runId).toBe(bb.outcome.runId);
        if (e.type === 'ExecutionRequested') {
          const d = e.data as EventData<'ExecutionRequested'>;
          expect(d.purpose).toBe('mistake-book');
          for (const x of requestPairs(d)) expect(x.testId.startsWith('mistake-book/')).toBe(true);
          pairs += requestPairs(d).length;
        } else if (e.type === 'ProgramExecuted') {
          results += (e.data as EventData<'ProgramExecuted'>).pairs.length;
        } else throw new Error(`unexpected ${e.type} in the variant's log`);
      }
    } finally {
      await own.close();
    }
    expect(pairs).toBe(wide!.executed);
    expect(results).toBe(pairs);
    // The recorded log is untouched, byte for byte (its events and blobs).
    expect(fileDigests(bb.outcome.dir)).toEqual(before);
    expect(before[path.basename(logFile)]).toBeDefined();
    // Each candidate's Mistake Book tally, per problem-round of round `round` (all rounds: none given).
    const bookRuns = (file: string, round?: number) => {
      const db = new Database(file, { readonly: true });
      try {
        const rows = db.prepare('SELECT round, scores FROM answer_selection').all() as { round: number; scores: string }[];
        return rows
          .filter((r) => round === undefined || r.round === round)
          .flatMap((r) => (JSON.parse(r.scores) as { book: { run: number } }[]).map((c) => c.book.run));
      } finally {
        db.close();
      }
    };
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    // The run's own answer selection (built on demand, not kept by the run), replayed aside.
    const recordedViews = path.join(root, 'exec-recorded-views.db');
    const recorded = await ProjectionRunner.replayInto(recordedViews, {
      log: bb.log,
      projections: RUN_PROJECTIONS,
      runId: bb.outcome.runId,
    });
    await recorded.close();
    // The new executions reach the read models: in round 2, the first to replay the book, answer
    // selection counts more Mistake Book runs than the run made (the wider replay's; later rounds
    // replay books that grew apart).
    expect(sum(bookRuns(wide!.file, 2))).toBeGreaterThan(sum(bookRuns(recordedViews, 2)));
    // A candidate's tally is the replay its variant plans: one test at most in `narrow`, though
    // its reward requests keep the recorded pairs they executed (the run replayed more).
    expect(Math.max(...bookRuns(recordedViews))).toBeGreaterThan(1);
    expect(Math.max(...bookRuns(narrow!.file))).toBe(1);
    // A second call is answered from the stored variant, without reading the log or executing.
    const again = await ablate({ log: bb.log, dir, variants: [wideSpec()], execute, hashes: true });
    expect(again.eventsRead).toBe(0);
    expect(answered(again.variants[0])).toMatchObject({ fromStore: true, executed: 0, log: wide!.log, hashes: wide!.hashes });
    // Without --execute too: what the variant executed is stored with it.
    expect(answered((await ablate({ log: bb.log, dir, variants: [wideSpec()] })).variants[0]).fromStore).toBe(true);
    // Read models lost, log kept (a call stopped before projecting): the log's executions answer, none runs again.
    rmSync(wide!.file);
    const rebuilt = await ablate({ log: bb.log, dir, variants: [wideSpec()], execute, hashes: true });
    expect(answered(rebuilt.variants[0])).toMatchObject({ fromStore: false, executed: 0, hashes: wide!.hashes });
    expect(fileDigests(bb.outcome.dir)).toEqual(before);
    // The command: refused without --execute (exit status 2); with it, the sandbox is the one the
    // recorded run's executor settings describe, and the line names the variant's log.
    const cliDir = path.join(root, 'cli-exec');
    mkdirSync(cliDir);
    for (const f of ['log.db', 'log.db-wal']) if (existsSync(path.join(bb.outcome.dir, f))) copyFileSync(path.join(bb.outcome.dir, f), path.join(cliDir, f));
    const refused = await runCli(['ablate', cliDir, '--variant', 'wide:mistakeBook.replay=64,mistakeBook.cap=null']);
    expect(refused.code).toBe(2);
    expect(refused.out).toMatch(/wide: REFUSED \(mistakeBook\.replay, mistakeBook\.cap\): needs \d+ verdict/);
    const ran = await runCli(['ablate', cliDir, '--variant', 'wide:mistakeBook.replay=64,mistakeBook.cap=null', '--execute']);
    expect(ran.code).toBe(0);
    expect(ran.out).toMatch(
      new RegExp(`wide: mistakeBook\\.replay=64, mistakeBook\\.cap=null \\(written to \\S+\\.db; ${wide!.executed} new executions in \\S+\\.log\\.db\\)`),
    );
    const json = JSON.parse((await runCli(['ablate', cliDir, '--variant', 'wide:mistakeBook.replay=64,mistakeBook.cap=null', '--json'])).out) as {
      variants: { fromStore: boolean; executed: number; log: string; hashes: Record<string, string> }[];
    };
    expect(json.variants[0]).toMatchObject({ fromStore: true, executed: 0, hashes: wide!.hashes });
    expect(json.variants[0]!.log.startsWith(path.join(cliDir, 'ablations'))).toBe(true);
  }, 300_000);

  it('the command prints the round tables side by side, and a refusal as one line with exit status 2', async () => {
    const out = await run(process.execPath, [path.join(repo, 'bin/crucible.js'), 'ablate', outcome.dir, '--variant', 'a0:rewards.alpha=0', '--round', '2'], {
      cwd: repo,
    });
    const lines = out.stdout.split('\n');
    expect(lines.some((l) => /^\s+1\s+recorded\s/.test(l))).toBe(true);
    expect(lines.some((l) => /^\s+2\s+a0\s/.test(l))).toBe(true);
    expect(lines.some((l) => /^\s+3\s/.test(l))).toBe(false);
    const refused = await run(process.execPath, [path.join(repo, 'bin/crucible.js'), 'ablate', outcome.dir, '--variant', 'w:sampling.whiteBox=false'], {
      cwd: repo,
    }).catch((e: { code: number; stderr: string }) => e);
    expect((refused as { code: number }).code).toBe(2);
    expect((refused as { stderr: string }).stderr).toMatch(/variant w: sampling\.whiteBox: cannot be answered from the log/);
  }, 60_000);
});

describe('ablation housekeeping', () => {
  /** A copy of the run's log in a directory of its own, so that its ablations directory starts empty. */
  const copyRun = (name: string) => {
    const dir = path.join(root, name);
    mkdirSync(dir);
    for (const f of ['log.db', 'log.db-wal']) if (existsSync(path.join(outcome.dir, f))) copyFileSync(path.join(outcome.dir, f), path.join(dir, f));
    return dir;
  };
  const temporaries = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => /\.(tmp|shared)-\d+/.test(f)) : []);

  it("answers a variant from the file of equal settings whatever the variant's name", async () => {
    const again = await ablate({
      log,
      dir: path.join(root, 'ablations'),
      variants: [spec('zero:rewards.alpha=0'), spec('half:rewards.alpha=0.5'), spec('other:rewards.alpha=0')],
    });
    const [zero, half, other] = again.variants.map(answered);
    expect(again.eventsRead).toBe(0);
    expect(zero).toMatchObject({ fromStore: true, file: answered(first.variants[1]).file, rows: answered(first.variants[1]).rows });
    // alpha=0.5 is the recorded setting: the variant is the run itself, and says so.
    expect(half).toMatchObject({ fromStore: true, file: answered(first.variants[0]).file });
    expect([half!.variant.sameAsRecorded, zero!.variant.sameAsRecorded]).toEqual([true, false]);
    expect(other!.file).toBe(zero!.file);
  });

  it("the command shows only the columns a variant changed, with deltas, and says when the settings equal the run's", async () => {
    const out = await runCli(['ablate', outcome.dir, '--variant', 'same:', '--variant', 'a0:rewards.alpha=0']);
    expect(out.code).toBe(0);
    expect(out.out).toMatch(/^ {2}same: the recorded settings \(equal to the run's\) \((answered from|written to) /m);
    const header = out.out.split('\n').find((l) => /^round\s+variant/.test(l))!;
    // alpha weighs the test reward only: the one column shown.
    expect(header.trim().split(/\s{2,}/)).toEqual(['round', 'variant', 'test reward']);
    const a0 = answered(first.variants[1]).rows;
    for (const [i, r] of outcome.rows.entries()) {
      const d = a0[i]!.testReward! - r.testReward!;
      const line = out.out.split('\n').find((l) => new RegExp(`^\\s+${r.round}\\s+a0\\s`).test(l))!;
      expect(line).toContain(`${a0[i]!.testReward!.toFixed(3)} (${d < 0 ? '-' : '+'}${Math.abs(d).toFixed(3)})`);
    }
    const same = await runCli(['ablate', outcome.dir, '--variant', 'same:']);
    expect(same.out).toMatch(/every figure of every variant equals the recorded run's/);
  });

  it('--list names each kept variant file with its settings, and --clean removes them', async () => {
    const dir = copyRun('housekeeping-list');
    expect((await runCli(['ablate', dir, '--variant', 'a0:rewards.alpha=0', '--variant', 'nobook:mistakeBook.enabled=false'])).code).toBe(0);
    const listed = await runCli(['ablate', dir, '--list']);
    expect(listed.code).toBe(0);
    expect(listed.out).toMatch(/^\s*a0-[0-9a-f]{16}\.db\s+rewards\.alpha=0\s+\d+\s+\d+\s+-$/m);
    expect(listed.out).toMatch(/^\s*nobook-[0-9a-f]{16}\.db\s+mistakeBook\.enabled=false\s+\d+/m);
    const cleaned = await runCli(['ablate', dir, '--clean']);
    expect(cleaned.out).toMatch(/^removed 4 file\(s\), \d+ KiB, from /);
    expect(existsSync(path.join(dir, 'ablations'))).toBe(false);
    expect((await runCli(['ablate', dir, '--list'])).out).toMatch(/^no variant files in /);
    const both = await runMain(['ablate', dir, '--list', '--variant', 'a0:rewards.alpha=0']);
    expect([both.code, both.stderr]).toEqual([2, 'crucible: give one of --list, --variant\n']);
  });

  it('a call removes the temporary files an interrupted one left, and leaves those of a live process', async () => {
    const dir = copyRun('housekeeping-stale');
    const ablations = path.join(dir, 'ablations');
    mkdirSync(ablations);
    // The id of a process that has exited.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    const left = [`a0-0123456789abcdef.db.tmp-${gone}-a0`, `a0-0123456789abcdef.db.tmp-${gone}-a0-wal`, `same-0123456789abcdef.db.shared-${gone}`];
    const live = `b-0123456789abcdef.db.tmp-${process.pid}-b`;
    for (const f of [...left, live]) writeFileSync(path.join(ablations, f), 'x');
    expect((await runCli(['ablate', dir, '--variant', 'a0:rewards.alpha=0'])).code).toBe(0);
    expect(temporaries(ablations)).toEqual([live]);
  });

  it('an ablate stopped by SIGINT while it writes leaves no temporary file', async () => {
    const dir = copyRun('housekeeping-interrupt');
    const ablations = path.join(dir, 'ablations');
    mkdirSync(ablations);
    const variants = [
      'same:',
      'a0:rewards.alpha=0',
      'a1:rewards.alpha=1',
      'a2:rewards.alpha=0.2',
      'nobook:mistakeBook.enabled=false',
      'r1:mistakeBook.replay=1',
    ];
    const child = spawn(process.execPath, [path.join(repo, 'bin/crucible.js'), 'ablate', dir, ...variants.flatMap((v) => ['--variant', v])], {
      cwd: repo,
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // Interrupted as soon as its first temporary file appears.
    let seen = false;
    const watcher = watch(ablations, (_event, name) => {
      if (!seen && name && /\.(tmp|shared)-\d+/.test(name)) {
        seen = true;
        child.kill('SIGINT');
      }
    });
    const code = await exited;
    watcher.close();
    expect(seen).toBe(true);
    expect(code).toBe(130);
    expect(temporaries(ablations)).toEqual([]);
  }, 120_000);
});
