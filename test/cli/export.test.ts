/**
 * `crucible export RUN --format parquet --out DIR` on a small demo run made by `crucible run`:
 * every file read back with hyparquet and checked against the run's read models (round table,
 * rewards, executions, the Mistake Book folded from its history) and its log; read from Python
 * too, where the interpreter has pandas (with pyarrow) or DuckDB.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, type FileMetaData } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMain } from '../support/cli.js';
import { smallDemoArgs } from '../support/small-config.js';
import { EXPORT_TABLES } from '../../src/report/export-tables.js';
import { loadRunSummary, type RunSummary } from '../../src/report/run-data.js';
import { openSqliteLog } from '../../src/events/sqlite/sqlite-log.js';
import { requestPairs, type EventData } from '../../src/events/catalog.js';
import { pairResultsOf } from '../../src/events/program-executed.js';
import { requestListsOf } from '../../src/projections/request-lists.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { answerSelectionFromVerdicts } from '../../src/projections/answer-selection-rows.js';
import { verdictOfCode } from '../../src/core/verdicts.js';

type Row = Record<string, unknown>;
interface Table {
  metadata: FileMetaData;
  rows: Row[];
}

const root = mkdtempSync(path.join(os.tmpdir(), 'crucible-export-'));
const out = path.join(root, 'export');
let runDir = '';
let summary: RunSummary;
let exported: { code: number; stdout: string; stderr: string };
const tables: Record<string, Table> = {};

async function readTable(file: string): Promise<Table> {
  const buffer = await asyncBufferFromFile(file);
  const metadata = await parquetMetadataAsync(buffer);
  return { metadata, rows: (await parquetReadObjects({ file: buffer, metadata })) as Row[] };
}

/** The views.db of the run, read-only, for `f`. */
function withViews<T>(f: (db: Database.Database) => T): T {
  const db = new Database(path.join(runDir, 'views.db'), { readonly: true, fileMustExist: true });
  try {
    return f(db);
  } finally {
    db.close();
  }
}

/** Answer selection counted from every request's verdicts, built aside from the run's log, for `f`. */
async function withVerdictViews<T>(f: (db: Database.Database) => T): Promise<T> {
  const log = await openSqliteLog(path.join(runDir, 'log.db'), { create: false });
  const file = path.join(root, 'verdict-views.db');
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
  try {
    const runner = await ProjectionRunner.replayInto(file, { log, projections: [answerSelectionFromVerdicts] });
    try {
      return f(runner.readModel.db);
    } finally {
      await runner.close();
    }
  } finally {
    await log.close();
  }
}

beforeAll(async () => {
  const run = await runMain(['run', 'configs/demo.yaml', ...smallDemoArgs(path.join(root, 'runs')), '--json']);
  expect(run.code).toBe(0);
  const runId = (JSON.parse(run.stdout.split('\n')[0]!) as { runId: string }).runId;
  runDir = path.join(root, 'runs', runId);
  exported = await runMain(['export', runDir, '--format', 'parquet', '--out', out]);
  summary = await loadRunSummary(runDir);
  for (const t of EXPORT_TABLES) tables[t.name] = await readTable(path.join(out, `${t.name}.parquet`));
}, 300_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

const rowsOf = (name: string) => tables[name]!.rows;

describe('crucible export --format parquet', () => {
  it('writes one file per table and says how many rows each has', () => {
    expect(exported.code).toBe(0);
    const counts = EXPORT_TABLES.map((t) => `${t.name} ${rowsOf(t.name).length}`).join(', ');
    expect(exported.stdout).toBe(`wrote ${EXPORT_TABLES.length} tables of run ${summary.runId} to ${out} (rows: ${counts})\n`);
    expect(readdirSync(out).sort()).toEqual(EXPORT_TABLES.map((t) => `${t.name}.parquet`).sort());
  });

  it('--json prints the run and each file with its rows; parquet is the default format', async () => {
    const again = path.join(root, 'again');
    const r = await runMain(['export', runDir, '--out', again, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      runId: summary.runId,
      tables: EXPORT_TABLES.map((t) => ({ name: t.name, file: path.join(again, `${t.name}.parquet`), rows: rowsOf(t.name).length })),
    });
  });

  it('each file has the documented columns, types and nullability, and names its table and run', () => {
    const PARQUET = {
      string: ['BYTE_ARRAY', 'UTF8'],
      json: ['BYTE_ARRAY', 'JSON'],
      int32: ['INT32'],
      int64: ['INT64'],
      double: ['DOUBLE'],
      boolean: ['BOOLEAN'],
    };
    for (const t of EXPORT_TABLES) {
      const { metadata } = tables[t.name]!;
      expect(metadata.schema.slice(1).map((s) => [s.name, s.type, s.converted_type, s.repetition_type])).toEqual(
        t.columns.map((c) => [c.name, PARQUET[c.type][0], PARQUET[c.type][1], c.nullable ? 'OPTIONAL' : 'REQUIRED']),
      );
      expect(metadata.key_value_metadata).toEqual(
        expect.arrayContaining([
          { key: 'crucible.table', value: t.name },
          { key: 'crucible.run', value: summary.runId },
        ]),
      );
      for (const row of rowsOf(t.name)) expect(row.run_id).toBe(summary.runId);
    }
  });

  it('run and rounds: the run summary and its round table, figure for figure', () => {
    const [run] = rowsOf('run');
    expect(rowsOf('run')).toHaveLength(1);
    expect(run).toMatchObject({ name: 'demo', method: 'code-a1', seed: 7n, status: 'finished', failure: null, planned_rounds: 2, rounds: 2 });
    // hyparquet reads a JSON column as its value.
    expect(run!.config).toEqual(summary.config);
    expect(rowsOf('rounds')).toEqual(
      summary.rows.map((r) => ({
        run_id: summary.runId,
        round: r.round,
        problems: r.problems,
        held_out_pass: r.heldOutPass,
        exact_correct: r.exactCorrect,
        validity: r.validity,
        exact_valid: r.exactValid,
        trained_correct: r.trainedCorrect,
        trained_valid: r.trainedValid,
        kill_rate: r.killRate,
        mistake_book: r.mistakeBook,
        code_reward: r.codeReward,
        test_reward: r.testReward,
        seconds: r.seconds,
      })),
    );
  });

  it('rewards: every row of the rewards read model, components as JSON', () => {
    const model = withViews((db) => db.prepare('SELECT * FROM rewards ORDER BY round, problem_id, role, sample_id').all() as Row[]);
    expect(model.length).toBeGreaterThan(0);
    expect(rowsOf('rewards').map(({ run_id: _r, ...rest }) => rest)).toEqual(
      model.map((r) => ({ ...r, components: JSON.parse(r.components as string) as unknown })),
    );
  });

  it('executions: one row per verdict answer selection recorded, with time and memory from the log', async () => {
    // Answer selection's view of the same verdicts, counted from every request (the run's own
    // reads the Judge's tallies instead): each request's letters and packed lists.
    const verdicts = await withVerdictViews((db) => {
      const view = {
        get: (table: string, key: Record<string, unknown>) =>
          db.prepare(`SELECT * FROM ${table} WHERE ${Object.keys(key)[0]} = ?`).get(Object.values(key)[0]) as Row | undefined,
      };
      const out: string[] = [];
      for (const r of db.prepare('SELECT request_id, codes FROM answer_selection_requests').all() as { request_id: string; codes: string }[]) {
        const b = requestListsOf(view, r.request_id)!;
        for (let i = 0; i < b.pairCount; i++) {
          if (r.codes[i] === '.') continue;
          const [pi, ti] = [b.pairs[2 * i]!, b.pairs[2 * i + 1]!];
          out.push(JSON.stringify([r.request_id, b.programIds[pi], b.programHash(pi), b.testIds[ti], b.testHash(ti), verdictOfCode(r.codes[i]!)]));
        }
      }
      return out;
    });
    const rows = rowsOf('executions');
    expect(rows.length).toBe(verdicts.length);
    expect(rows.map((r) => JSON.stringify([r.request_id, r.program_id, r.program_hash, r.test_id, r.test_hash, r.verdict])).sort()).toEqual(verdicts.sort());
    // Every purpose the Judge asks for in a Code-A1 round is there, each run timed.
    expect(new Set(rows.map((r) => r.purpose))).toEqual(new Set(['oracle', 'reward', 'heldout', 'kill']));
    for (const r of rows) expect(r.round === 1 || r.round === 2).toBe(true);
    // Time and memory as the log recorded them, pair by pair.
    const recorded = new Map<string, [number, number]>();
    const log = await openSqliteLog(path.join(runDir, 'log.db'), { create: false, readOnly: true });
    try {
      const pairs = new Map<string, ReturnType<typeof requestPairs>>();
      for await (const e of log.read({}, { types: ['ExecutionRequested', 'ProgramExecuted'] })) {
        if (e.type === 'ExecutionRequested') {
          const d = e.data as EventData<'ExecutionRequested'>;
          pairs.set(d.requestId, requestPairs(d));
        } else for (const v of pairResultsOf(e, (id) => pairs.get(id))) recorded.set(`${v.requestId} ${v.programId} ${v.testId}`, [v.timeMs, v.memoryKb]);
      }
    } finally {
      await log.close();
    }
    expect(rows.map((r) => [r.time_ms, r.memory_kb])).toEqual(
      rows.map((r) => recorded.get(`${r.request_id as string} ${r.program_id as string} ${r.test_id as string}`)),
    );
    expect(rows.some((r) => (r.time_ms as number) > 0)).toBe(true);
    expect(rows.some((r) => r.verdict === 'accepted') && rows.some((r) => r.verdict !== 'accepted')).toBe(true);
  });

  it('mistake_book: its history folds to the read model, and to the round table size at the end of each round', () => {
    const history = rowsOf('mistake_book');
    expect(history.map((r) => r.change)).toEqual(history.map((_, i) => i));
    const fold = (upTo: number) => {
      const book = new Map<string, Row>();
      for (const c of history) if ((c.round as number) <= upTo) book.set(`${c.problem_id as string}\u0000${c.test_key as string}`, c);
      return book;
    };
    for (const r of summary.rows) expect([...fold(r.round).values()].filter((c) => (c.count as number) > 0).length).toBe(r.mistakeBook);
    const model = withViews((db) => db.prepare('SELECT problem_id, test_key, test_hash, count, blacklisted FROM mistake_book').all() as Row[]);
    expect(model.length).toBeGreaterThan(0);
    const folded = [...fold(Infinity).values()]
      .filter((c) => (c.count as number) > 0 || c.cause === 'blacklist')
      .map((c) => ({ problem_id: c.problem_id, test_key: c.test_key, test_hash: c.test_hash, count: c.count, blacklisted: c.cause === 'blacklist' ? 1 : 0 }));
    const order = (rows: Row[]) =>
      [...rows].sort((a, b) => `${a.problem_id as string}${a.test_key as string}`.localeCompare(`${b.problem_id as string}${b.test_key as string}`));
    expect(order(folded)).toEqual(order(model));
  });

  it("samples, tests and training steps: every one in the log; the tests' validity is the round table's", async () => {
    const log = await openSqliteLog(path.join(runDir, 'log.db'), { create: false, readOnly: true });
    const counts: Record<string, number> = {};
    try {
      for await (const e of log.read({}, { types: ['SolutionSampled', 'TestsSampled', 'TrainingStepCompleted'] })) counts[e.type] = (counts[e.type] ?? 0) + 1;
    } finally {
      await log.close();
    }
    const samples = rowsOf('samples');
    const code = samples.filter((s) => s.role === 'code');
    // 2 rounds x 2 problems x a group of 4 programs.
    expect(code).toHaveLength(16);
    expect(code.length).toBe(counts.SolutionSampled);
    expect(samples.length - code.length).toBe(counts.TestsSampled);
    const ids = new Set(samples.map((s) => s.sample_id));
    for (const r of rowsOf('rewards')) expect(ids.has(r.sample_id)).toBe(true);

    const tests = rowsOf('tests');
    expect(tests.length).toBe(samples.reduce((n, s) => n + ((s.suite_size as number | null) ?? 0), 0));
    for (const r of summary.rows) {
      const round = tests.filter((t) => t.round === r.round);
      expect(round.filter((t) => t.valid === true).length / round.length).toBe(r.validity);
    }

    const steps = rowsOf('training_steps');
    expect(steps.length).toBe(counts.TrainingStepCompleted);
    expect(steps.map((s) => [s.round, s.role, (s.to_version as number) - (s.from_version as number)])).toEqual([
      [1, 'code', 1],
      [1, 'test', 1],
      [2, 'code', 1],
      [2, 'test', 1],
    ]);
    for (const s of steps) expect(Object.keys(s.metrics as object).length).toBeGreaterThan(0);
  });

  it('refuses an unknown format and a folder that is not a run, with one line each', async () => {
    const csv = await runMain(['export', runDir, '--format', 'csv', '--out', path.join(root, 'never')]);
    expect(csv.code).toBe(2);
    expect(csv.stderr).toBe('crucible: --format csv: expected one of parquet\n');
    const notRun = await runMain(['export', root, '--out', path.join(root, 'never')]);
    expect(notRun.code).toBe(2);
    expect(notRun.stderr).toBe(`crucible: ${root}: no log.db here: not a crucible run directory\n`);
    expect(existsSync(path.join(root, 'never'))).toBe(false);
  });
});

/** The interpreter the Python read uses, and which library it reads Parquet with. */
const PYTHON = process.env.CRUCIBLE_ANALYSIS_PYTHON ?? '/usr/bin/python3';
function pythonReader(): { reader: 'pandas' | 'duckdb' | null; missing: string | null } {
  const has = (mod: string) => spawnSync(PYTHON, ['-c', `import ${mod}`], { encoding: 'utf8' }).status === 0;
  if (has('pandas, pyarrow')) return { reader: 'pandas', missing: null };
  if (has('duckdb')) return { reader: 'duckdb', missing: null };
  return { reader: null, missing: `${PYTHON} has neither pandas with pyarrow nor duckdb (set CRUCIBLE_ANALYSIS_PYTHON to one that has)` };
}
const PY = pythonReader();
if (PY.missing) process.stderr.write(`crucible tests: ${PY.missing}; the Python read of the export is skipped\n`);

/** Reads every table with pandas or DuckDB alone (no pandas needed for DuckDB), and prints what
 * the test compares: rows and columns of each, and a few values. */
const READ_SCRIPT = `
import json, sys
from collections import Counter
out, reader, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
def table(name):
    path = f"{out}/{name}.parquet"
    if reader == "pandas":
        import pandas as pd
        df = pd.read_parquet(path)
        return list(df.columns), {c: df[c].tolist() for c in df.columns}
    import duckdb
    rel = duckdb.sql(f"SELECT * FROM '{path}'")
    rows = rel.fetchall()
    return rel.columns, {c: [r[i] for r in rows] for i, c in enumerate(rel.columns)}
result = {}
for name in names:
    columns, values = table(name)
    result[name] = {"rows": len(values[columns[0]]), "columns": columns}
result["held_out_pass"] = [float(x) for x in table("rounds")[1]["held_out_pass"]]
result["verdicts"] = dict(Counter(table("executions")[1]["verdict"]))
result["components"] = [json.loads(c) for c in table("rewards")[1]["components"][:3]]
print(json.dumps(result))
`;

describe('the export read from Python', () => {
  it.skipIf(PY.missing !== null)(`pandas or DuckDB reads every file to the same rows and values${PY.missing ? ` (skipped: ${PY.missing})` : ''}`, () => {
    const script = path.join(root, 'read.py');
    writeFileSync(script, READ_SCRIPT);
    const names = EXPORT_TABLES.map((t) => t.name);
    const r = spawnSync(PYTHON, [script, out, PY.reader!, names.join(',')], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    const got = JSON.parse(r.stdout) as Record<string, unknown>;
    for (const t of EXPORT_TABLES) expect(got[t.name]).toEqual({ rows: rowsOf(t.name).length, columns: t.columns.map((c) => c.name) });
    expect(got.held_out_pass).toEqual(summary.rows.map((r) => r.heldOutPass));
    const verdicts: Record<string, number> = {};
    for (const e of rowsOf('executions')) verdicts[e.verdict as string] = (verdicts[e.verdict as string] ?? 0) + 1;
    expect(got.verdicts).toEqual(verdicts);
    expect(got.components).toEqual(
      rowsOf('rewards')
        .slice(0, 3)
        .map((r) => r.components),
    );
  });
});
