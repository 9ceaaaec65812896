/**
 * `crucible ablate`: re-judges a recorded run under variant settings. The log is read and decoded
 * once and every variant folds the same events (fan-out, not one reader per variant); each
 * variant's events are projected by the run's own projections into its own SQLite file, keyed by
 * the projection versions, the variant's settings hash and the stop position, so a second call
 * with the same variant is answered from that file without reading the log.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { RunConfig } from '../config/schema.js';
import { Problem } from '../core/problem.js';
import { canonicalJson } from '../core/canonical-json.js';
import type { EventData } from '../events/catalog.js';
import type { EventEnvelope } from '../events/envelope.js';
import type { EventLog, Position } from '../events/log.js';
import { ProjectionRunner } from '../projections/runner.js';
import { readingDerived } from '../projections/damaged-file.js';
import { roundTableProjection } from '../projections/run-views.js';
import { ANSWER_SELECTION_TYPES, MISTAKE_BOOK_PREFIX } from '../projections/answer-selection.js';
import { emptyRoundTable, reduceRoundTable, roundRows, type RoundRow, type RoundTableState } from '../projections/round-table.js';
import { emptyRecordedVerdicts, forgetRequests, observeVerdicts, VERDICT_EVENT_TYPES, type RecordedVerdicts } from '../projections/recorded-verdicts.js';
import { AblationError, VariantRefusedError } from './errors.js';
import { SharedSandbox, VariantExecutions, type ExecuteOptions } from './execute.js';
import { OverlayBlobStore, variantHead, variantPosition } from './variant-log.js';
import {
  buildVariant,
  projectShared,
  summarize,
  type Built,
  SHARED_PROJECTIONS,
  VARIANT_PROJECTIONS,
  type Projected,
  type ProjectionJob,
  type SharedJob,
} from './project.js';
import { RecordedAnswers, RecordedJudge, VariantJudge } from './rejudge.js';
import { isJudgeStream } from '../core/judge-shares.js';
import { resolveVariant, type Variant, type VariantSpec } from './variant.js';
import { removeTemporaries, storedFileOfKey, writeVariantSettings } from './housekeeping.js';

/** Bump when the re-judgement changes what it derives: stored variant files are then rebuilt. */
export const ABLATION_VERSION = 1;

export interface AblationRequest {
  log: EventLog;
  /** Where variant read models are kept (one SQLite file per variant and stop position). */
  dir: string;
  variants: readonly VariantSpec[];
  /** The run in the log; default the first RunStarted's. */
  runId?: string;
  /** Stop after this log position (default: the head). */
  to?: Position;
  /** Threads projecting several variants at once (default 1: this thread). Measured on 2 cores
   * (`npm run bench -- ablate`), threads lose: each one loads the projection code again (measured from the sources
   * through tsx, before the compiled build). */
  threads?: number;
  /** Run the executions a variant needs that the log lacks, into the variant's own log
   * (without it, such a variant is refused). */
  execute?: ExecuteOptions;
  /** Compute each variant's read-model state hashes (a pass over every row; default false). */
  hashes?: boolean;
}

export type VariantOutcome =
  | {
      name: string;
      status: 'answered';
      variant: Variant;
      file: string;
      fromStore: boolean;
      rows: RoundRow[];
      /** sha256 of each read model, when asked for (AblationRequest.hashes). */
      hashes: Record<string, string> | null;
      /** The variant's own log of the executions it ran with --execute (null: it needed none). */
      log: string | null;
      /** Pairs executed by this call (0 when answered from the recorded ones or the variant's log). */
      executed: number;
    }
  | { name: string; status: 'refused'; variant: Variant; setting: string | null; reason: string };

export interface AblationResult {
  runId: string;
  method: string;
  position: Position;
  /** The recorded run's round table up to `position`. */
  recorded: RoundRow[];
  variants: VariantOutcome[];
  /** Events read from the log (0 when every variant was answered from its file). */
  eventsRead: number;
  /** Wall time of the two phases: one read of the log re-judged by every variant, then each
   * variant's projection into its file. */
  timings: { judgeMs: number; projectMs: number };
  /** Variants projected by this call that shared one answer selection and Mistake Book (built
   * once), by name. */
  shared: string[][];
  /** Variants projected by this call whose answer selection counted only its Mistake Book
   * tallies again, beside the scores of variant `from` (whose base file was built). */
  derivedSelection: { name: string; from: string }[];
}

async function runStarted(log: EventLog, runId: string | undefined): Promise<EventEnvelope> {
  for await (const e of log.read({ limit: 1 }, runId ? { runId, types: ['RunStarted'] } : { types: ['RunStarted'] })) return e;
  throw new AblationError(`${log.location}: no RunStarted event${runId ? ` for run ${runId}` : ''}: not a crucible run`);
}

/** The variant's own log of the executions it ran (--execute), beside its read models. */
export const executionLogOf = (file: string) => file.replace(/\.db$/, '.log.db');

/** What a variant's read models are keyed by: the projection versions, its settings and the stop (never its name). */
export function variantKey(runId: string, variant: Variant, to: Position): string {
  return createHash('sha256')
    .update(
      canonicalJson({
        ablation: ABLATION_VERSION,
        projections: VARIANT_PROJECTIONS.map((p) => [p.name, p.version]),
        runId,
        settings: variant.settingsHash,
        to,
      }),
    )
    .digest('hex')
    .slice(0, 16);
}

/** Where a variant's read models are kept: the file of its key already there, under whatever
 * name it was built, else `<name>-<key>.db`. */
export function variantFile(dir: string, runId: string, variant: Variant, to: Position): string {
  const key = variantKey(runId, variant, to);
  return storedFileOfKey(dir, key) ?? path.join(dir, `${variant.name}-${key}.db`);
}

async function readStored(log: EventLog, runId: string, file: string, hashes: boolean): Promise<Projected> {
  const runner = await ProjectionRunner.open({ log, readModel: file, projections: VARIANT_PROJECTIONS, runId, readOnly: true });
  try {
    return await summarize(runner, hashes);
  } finally {
    await runner.close();
  }
}

/**
 * Which variants can share the answer selection and Mistake Book read models: those their inputs
 * do not tell apart. Answer selection reads the samples, the test verdicts (TestsJudged), the
 * execution requests and results, and which problem-round was evaluated (a ProblemEvaluated's
 * round and problem, which every variant writes where the recorded judgement was); the Mistake
 * Book reads the book's changes. Of these a variant changes only the reward request its Mistake
 * Book plans and the book's changes (the Code-A1 family: mistakeBook.* and
 * codeA1.mistakeBookRule decide both) and, with --execute, the executions it runs. So rewards.*,
 * selection.testSamples, codeA1.codeGroupFilter, method (code-a1 or self-play), tcs.* and ace.*
 * never reach them; variants alike in the Mistake Book settings share them, once their events are
 * found alike (sameSharedInput: a variant that ran executions is not).
 */
function sharingGroup(variant: Variant): string {
  const c = variant.config;
  return c.method === 'code-a1' || c.method === 'self-play'
    ? canonicalJson({ mistakeBook: c.mistakeBook, rule: c.codeA1.mistakeBookRule })
    : 'plans no request';
}

const SHARED_TYPES: ReadonlySet<string> | null = SHARED_PROJECTIONS.every((p) => p.types) ? new Set(SHARED_PROJECTIONS.flatMap((p) => p.types!)) : null;

/** Whether the shared read models built from `a` are those of `b`: the same events of their
 * types in the same order (one object when passed through or planned alike); of those a variant
 * writes itself, a ProblemEvaluated of the same problem-round (answer selection reads its round,
 * problem and candidates' tallies, which the same requests and verdicts make the same) and a
 * MistakeBookUpdated with the same changes. */
function sameSharedInput(a: readonly EventEnvelope[], b: readonly EventEnvelope[]): boolean {
  if (SHARED_TYPES === null) return false;
  const read = (events: readonly EventEnvelope[]) => events.filter((e) => SHARED_TYPES.has(e.type));
  const x = read(a);
  const y = read(b);
  if (x.length !== y.length) return false;
  return x.every((e, i) => {
    const f = y[i]!;
    if (e === f) return true;
    if (e.type !== f.type) return false;
    const [d, g] = [e.data as { round: number; problemId: string }, f.data as { round: number; problemId: string }];
    if (d.round !== g.round || d.problemId !== g.problemId) return false;
    if (e.type === 'ProblemEvaluated') return true;
    if (e.type !== 'MistakeBookUpdated') return false;
    const [c, h] = [(e.data as EventData<'MistakeBookUpdated'>).changes, (f.data as EventData<'MistakeBookUpdated'>).changes];
    return c === h || canonicalJson(c) === canonicalJson(h);
  });
}

const SELECTION_TYPES: ReadonlySet<string> = new Set(ANSWER_SELECTION_TYPES);

type Requested = EventData<'ExecutionRequested'>;

/** Whether the i-th pair of `list` in `a` and the j-th of `other` in `b` name the same program and test. */
function samePair(a: Requested, list: readonly number[], i: number, b: Requested, other: readonly number[], j: number): boolean {
  const [p, q] = [a.programs[list[2 * i]!]!, b.programs[other[2 * j]!]!];
  const [t, u] = [a.tests[list[2 * i + 1]!]!, b.tests[other[2 * j + 1]!]!];
  return p.programId === q.programId && p.programHash === q.programHash && t.testId === u.testId && t.testHash === u.testHash;
}

/** The reused pairs that are not Mistake Book replays, as sorted keys (a multiset: tallies count each). */
function reusedBesidesBook(d: Requested): string[] {
  const out: string[] = [];
  for (let i = 0; i < d.reused.length; i += 2) {
    const t = d.tests[d.reused[i + 1]!]!;
    if (t.testId.startsWith(MISTAKE_BOOK_PREFIX)) continue;
    const p = d.programs[d.reused[i]!]!;
    out.push(`${p.programId}\u0000${p.programHash}\u0000${t.testId}\u0000${t.testHash}`);
  }
  return out.sort();
}

/** Whether two replays of one recorded reward request execute the same pairs, in the same order,
 * and reuse the same pairs but Mistake Book ones. */
function apartInBookReplays(a: Requested, b: Requested): boolean {
  if (a.requestId !== b.requestId || a.purpose !== 'reward' || b.purpose !== 'reward' || a.pairs.length !== b.pairs.length) return false;
  for (let i = 0; i < a.pairs.length / 2; i++) if (!samePair(a, a.pairs, i, b, b.pairs, i)) return false;
  const [u, v] = [reusedBesidesBook(a), reusedBesidesBook(b)];
  return u.length === v.length && u.every((k, i) => k === v[i]);
}

/** Whether the answer selection of `b`'s events is that of `a`'s but for Mistake Book tallies
 * (answerSelectionBeside): the same events of its types in the same order (one object when
 * passed through), but for reward requests apart only in the Mistake Book pairs they reuse (a
 * variant that replays fewer Mistake Book tests plans them so: ./rejudge.ts) and each
 * problem-round evaluated once, in the same order. */
function selectionApartInBook(a: readonly EventEnvelope[], b: readonly EventEnvelope[]): boolean {
  const read = (events: readonly EventEnvelope[]) => events.filter((e) => SELECTION_TYPES.has(e.type));
  const x = read(a);
  const y = read(b);
  if (x.length !== y.length) return false;
  const evaluated = new Set<string>();
  return x.every((e, i) => {
    const f = y[i]!;
    if (e.type !== f.type) return false;
    if (e.type === 'ProblemEvaluated') {
      const [d, g] = [e.data as EventData<'ProblemEvaluated'>, f.data as EventData<'ProblemEvaluated'>];
      const key = `${g.round}/${g.problemId}`;
      if (d.round !== g.round || d.problemId !== g.problemId || evaluated.has(key)) return false;
      evaluated.add(key);
      return true;
    }
    if (e === f) return true;
    return e.type === 'ExecutionRequested' && apartInBookReplays(e.data as Requested, f.data as Requested);
  });
}

/** Projection jobs for the judged variants: variants that can share read models get a base file
 * with them, built once from the first one's events; a variant that cannot, but whose answer
 * selection differs from a base's only in its Mistake Book tallies, counts only those again
 * beside that base's scores (a base is built for one variant alone when another derives from it). */
function planProjection(
  judges: readonly VariantJudge[],
  fileOf: (judge: VariantJudge) => string,
  runId: string,
  head: Position,
  hashes: boolean,
): { shared: SharedJob[]; jobs: ProjectionJob[]; derived: { name: string; from: string }[] } {
  const shared: SharedJob[] = [];
  const jobs: ProjectionJob[] = judges.map((judge) => ({
    kind: 'variant',
    name: judge.variant.name,
    runId,
    file: fileOf(judge),
    events: judge.events,
    head,
    hashes,
    base: null,
    answerBasis: null,
  }));
  const groups = new Map<string, ProjectionJob[]>();
  for (const job of jobs) {
    const key = sharingGroup(judges[jobs.indexOf(job)]!.variant);
    groups.set(key, [...(groups.get(key) ?? []), job]);
  }
  const baseOf = (first: ProjectionJob, members: readonly ProjectionJob[]): SharedJob => {
    const base: SharedJob = { kind: 'shared', name: first.name, runId, file: `${first.file}.shared-${process.pid}`, events: first.events, head };
    shared.push(base);
    for (const job of members) job.base = base.file;
    return base;
  };
  for (const members of groups.values()) {
    const [first, ...rest] = members;
    const alike = rest.filter((job) => sameSharedInput(first!.events, job.events));
    if (alike.length > 0) baseOf(first!, [first!, ...alike]);
  }
  const derived: { name: string; from: string }[] = [];
  for (const job of jobs) {
    if (job.base !== null) continue;
    let from = shared.find((base) => selectionApartInBook(base.events, job.events));
    if (!from) {
      const other = jobs.find((o) => o !== job && o.base === null && o.answerBasis === null && selectionApartInBook(o.events, job.events));
      if (other) from = baseOf(other, [other]);
    }
    if (!from) continue;
    job.answerBasis = from.file;
    derived.push({ name: job.name, from: from.name });
  }
  return { shared, jobs, derived };
}

/** Projects the variants, the shared read models first: on piscina threads when there are
 * several (each projection is independent SQLite work), else in this thread, which avoids
 * starting a thread for one. */
async function projectAll(shared: readonly SharedJob[], jobs: readonly ProjectionJob[], threads: number): Promise<Projected[]> {
  const pool =
    jobs.length < 2 || threads < 2
      ? null
      : new Piscina({ filename: fileURLToPath(new URL('./project.worker.mjs', import.meta.url)), maxThreads: Math.min(threads, jobs.length), minThreads: 0 });
  try {
    if (pool) {
      await Promise.all(shared.map((job) => pool.run(job)));
      return (await Promise.all(jobs.map((job) => pool.run(job)))) as Projected[];
    }
    for (const job of shared) await projectShared(job);
    // Each file is synced and renamed while the next is built; all are on disk (or removed)
    // before this returns or throws.
    const built: Built[] = [];
    let failedBuild: { err: unknown } | null = null;
    try {
      for (const job of jobs) built.push(await buildVariant(job));
    } catch (err) {
      failedBuild = { err };
    }
    const failed = (await Promise.allSettled(built.map((b) => b.stored))).find((r) => r.status === 'rejected');
    if (failedBuild) throw failedBuild.err;
    if (failed) throw failed.reason;
    return built.map((b) => b.out);
  } finally {
    await pool?.destroy();
    for (const job of shared) for (const suffix of ['', '-wal', '-shm']) rmSync(`${job.file}${suffix}`, { force: true });
  }
}

/** One read of the log re-judged by every pending variant: each event is folded once into the
 * recorded verdicts and the Judge's recorded state, and handed to every variant. A variant
 * refused mid-way is recorded in `outcomes` and dropped; the others go on. */
async function rejudgeAll(
  req: AblationRequest,
  started: EventEnvelope,
  problems: ReadonlyMap<string, Problem>,
  to: Position,
  pending: readonly { variant: Variant; file: string }[],
  executions: ReadonlyMap<Variant, VariantExecutions | null>,
  outcomes: Map<string, VariantOutcome>,
): Promise<{ judges: VariantJudge[]; events: number; table: RoundTableState }> {
  const runId = started.runId;
  const blobs = new OverlayBlobStore(req.log.blobs);
  const recordedJudge = new RecordedJudge();
  // A variant keeps only the events its read models read (the largest, TestsSampled, none of them does).
  const kept = VARIANT_PROJECTIONS.every((p) => p.types) ? [...new Set(VARIANT_PROJECTIONS.flatMap((p) => p.types!))] : null;
  const keep = kept && new Set(kept);
  let judges = pending.map(
    ({ variant }) => new VariantJudge(variant, runId, problems, blobs, recordedJudge, { executions: executions.get(variant) ?? null, keep: kept }),
  );
  let verdicts: RecordedVerdicts = emptyRecordedVerdicts();
  // The recorded verdicts as the variants read them, built again only after a verdict event.
  let answers: RecordedAnswers | null = null;
  const requestsOf = new Map<string, string[]>();
  const verdictTypes = new Set<string>(VERDICT_EVENT_TYPES);
  const pages = req.log.readPages
    ? req.log.readPages({ to }, { runId })
    : (async function* () {
        for await (const e of req.log.read({ to }, { runId })) yield [e];
      })();
  let events = 0;
  // The recorded round table, from the same read.
  const tableTypes = new Set(roundTableProjection.types!);
  let table = emptyRoundTable();
  for await (const page of pages) {
    for (const e of page) {
      events++;
      if (tableTypes.has(e.type)) table = reduceRoundTable(table, e);
      // One object at the variant position for every variant that passes the event through.
      const moved = keep === null || keep.has(e.type) ? { ...e, position: variantPosition(events, 0) } : null;
      if (verdictTypes.has(e.type)) {
        verdicts = observeVerdicts(verdicts, e, () => true);
        answers = null;
        if (e.type === 'ExecutionRequested') {
          const r = e.data as EventData<'ExecutionRequested'>;
          const k = `${r.round}/${r.problemId}`;
          requestsOf.set(k, [...(requestsOf.get(k) ?? []), r.requestId]);
        }
      }
      answers ??= new RecordedAnswers(verdicts);
      for (const judge of judges) {
        try {
          const judging = judge.step(e, answers, events, moved);
          if (judging) await judging;
        } catch (err) {
          if (!(err instanceof VariantRefusedError)) throw err;
          outcomes.set(judge.variant.name, { name: judge.variant.name, status: 'refused', variant: judge.variant, setting: err.setting, reason: err.reason });
          judges = judges.filter((j) => j !== judge);
        }
      }
      recordedJudge.fold(e);
      if (e.type === 'ProblemEvaluated' && isJudgeStream(e.stream)) {
        // Every variant has judged this problem-round: its per-request lists can go.
        const r = e.data as EventData<'ProblemEvaluated'>;
        const k = `${r.round}/${r.problemId}`;
        verdicts = forgetRequests(verdicts, requestsOf.get(k) ?? []);
        answers = null;
        requestsOf.delete(k);
      }
    }
  }
  return { judges, events, table };
}

export async function ablate(req: AblationRequest): Promise<AblationResult> {
  const started = await runStarted(req.log, req.runId);
  const runId = started.runId;
  const d = started.data as EventData<'RunStarted'>;
  const recordedConfig = RunConfig.parse(d.config);
  if (recordedConfig.method === 'evolvecoder') {
    throw new AblationError(
      "an EvolveCoder run's judgement chooses the tests later rounds execute (TestsEvolved): re-judging it under other settings would need executions the log lacks",
    );
  }
  const names = new Set<string>();
  const variants = req.variants.map((spec) => {
    if (names.has(spec.name)) throw new VariantRefusedError(spec.name, null, 'two variants have this name');
    names.add(spec.name);
    return resolveVariant(spec, recordedConfig);
  });
  const head = await req.log.head();
  const to = req.to !== undefined && req.to < head ? req.to : head;

  mkdirSync(req.dir, { recursive: true });
  // What an interrupted call left (its process is gone) is removed before anything is built.
  removeTemporaries(req.dir);
  const outcomes = new Map<string, VariantOutcome>();
  const pending: { variant: Variant; file: string }[] = [];
  // A variant whose settings equal an earlier one's in this call is answered by that one's file.
  const aliases: { variant: Variant; of: string }[] = [];
  const firstOfKey = new Map<string, string>();
  for (const variant of variants) {
    const key = variantKey(runId, variant, to);
    const first = firstOfKey.get(key);
    if (first !== undefined) {
      aliases.push({ variant, of: first });
      continue;
    }
    firstOfKey.set(key, variant.name);
    const file = variantFile(req.dir, runId, variant, to);
    const log = executionLogOf(file);
    if (existsSync(file)) {
      const stored = await readingDerived(file, path.dirname(path.resolve(req.dir)), () => readStored(req.log, runId, file, req.hashes ?? false));
      outcomes.set(variant.name, {
        name: variant.name,
        status: 'answered',
        variant,
        file,
        fromStore: true,
        ...stored,
        log: existsSync(log) ? log : null,
        executed: 0,
      });
    } else pending.push({ variant, file });
  }

  let eventsRead = 0;
  let table: RoundTableState | null = null;
  const timings = { judgeMs: 0, projectMs: 0 };
  let sharedModels: string[][] = [];
  let derived: { name: string; from: string }[] = [];
  if (pending.length > 0) {
    const judgeStart = performance.now();
    const problems = new Map<string, Problem>();
    for (const ref of d.problems) problems.set(ref.problemId, Problem.parse(JSON.parse(await req.log.blobs.getText(ref.problemHash))));
    const sandbox = req.execute ? new SharedSandbox(req.execute, recordedConfig) : null;
    const executions = new Map(
      pending.map(({ variant, file }) => [
        variant,
        sandbox
          ? new VariantExecutions({
              file: executionLogOf(file),
              blobs: req.log.blobs,
              sandbox,
              runId,
              config: variant.config,
              problems: [...problems.values()],
            })
          : null,
      ]),
    );
    try {
      const rejudged = await rejudgeAll(req, started, problems, to, pending, executions, outcomes);
      const { judges, events } = rejudged;
      table = rejudged.table;
      eventsRead = events;
      timings.judgeMs = performance.now() - judgeStart;
      const projectStart = performance.now();
      const fileOf = (judge: VariantJudge) => pending.find((x) => x.variant === judge.variant)!.file;
      const planned = planProjection(judges, fileOf, runId, variantHead(events), req.hashes ?? false);
      const { shared, jobs } = planned;
      const projected = await projectAll(shared, jobs, req.threads ?? 1);
      sharedModels = shared.map((s) => jobs.filter((job) => job.base === s.file).map((job) => job.name)).filter((names) => names.length > 1);
      derived = planned.derived;
      judges.forEach((judge, i) => {
        const ran = executions.get(judge.variant);
        const log = ran && existsSync(ran.file) ? ran.file : null;
        outcomes.set(judge.variant.name, {
          name: judge.variant.name,
          status: 'answered',
          variant: judge.variant,
          file: jobs[i]!.file,
          fromStore: false,
          ...projected[i]!,
          log,
          executed: ran?.executed ?? 0,
        });
      });
      timings.projectMs = performance.now() - projectStart;
    } finally {
      for (const x of executions.values()) await x?.close();
      await sandbox?.close();
    }
  }
  for (const a of aliases) {
    const of = outcomes.get(a.of)!;
    outcomes.set(a.variant.name, { ...of, name: a.variant.name, variant: a.variant });
  }
  for (const o of outcomes.values()) {
    if (o.status !== 'answered') continue;
    const v = o.variant;
    writeVariantSettings(o.file, {
      name: path.basename(o.file).replace(/-[0-9a-f]{16}\.db$/, ''),
      runId,
      overrides: v.overrides,
      settingsHash: v.settingsHash,
      sameAsRecorded: v.sameAsRecorded,
      position: to,
    });
  }
  if (table === null) {
    // Every variant answered from its file: the recorded round table from a narrow read (a few events per round).
    table = emptyRoundTable();
    for await (const e of req.log.read({ to }, { runId, types: roundTableProjection.types! })) table = reduceRoundTable(table, e);
  }
  return {
    runId,
    method: recordedConfig.method,
    position: to,
    recorded: roundRows(table),
    variants: variants.map((v) => outcomes.get(v.name)!),
    eventsRead,
    timings,
    shared: sharedModels,
    derivedSelection: derived,
  };
}
