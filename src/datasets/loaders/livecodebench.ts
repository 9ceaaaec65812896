/**
 * LiveCodeBench code_generation_lite rows: public / private test cases as JSON text, the private
 * ones possibly base64(zlib(pickle(json_text))), decoded here by a restricted unpickler that never
 * runs pickle code. `functional` tests are calls: the input is one JSON value per argument line,
 * the output one JSON value; the function is metadata.func_name (a `Solution` method on LeetCode).
 */
import { z } from 'zod';
import type { ProblemInput, TestCase } from '../../core/problem.js';
import { entryPointFor, formatIssues, jsonField, parseRow, valuesField } from './common.js';
import { decodeBase64ZlibPickle, PickleError } from './pickle.js';
import { RowRejected, type ConvertContext, type DatasetLoader } from './types.js';

const LcbRow = z.object({
  question_id: z.union([z.string().min(1), z.number().int()]),
  question_title: z.string().optional(),
  question_content: z.string(),
  platform: z.string().optional(),
  contest_id: z.union([z.string(), z.number()]).nullable().optional(),
  contest_date: z.string().nullable().optional(),
  starter_code: z.string().nullable().optional(),
  difficulty: z.string().nullable().optional(),
  public_test_cases: z.string(),
  private_test_cases: z.string(),
  metadata: z.string().nullable().optional(),
});

const LcbTest = z.object({ input: z.string(), output: z.string(), testtype: z.enum(['stdin', 'functional']) });
const LcbTests = z.array(LcbTest);
type LcbTest = z.infer<typeof LcbTest>;

function parseTests(value: unknown, field: string, id: string): LcbTest[] {
  const result = LcbTests.safeParse(value);
  if (!result.success) throw new RowRejected(`${field}: ${formatIssues(result.error)}`, id);
  return result.data;
}

/** Private tests: plain JSON text, or the documented base64 + zlib + pickle(JSON text) blob. */
export function decodePrivateTests(text: string, id: string): LcbTest[] {
  if (text.trim() === '') return [];
  try {
    return parseTests(JSON.parse(text), 'private_test_cases', id);
  } catch (err) {
    if (err instanceof RowRejected) throw err;
  }
  let inner: unknown;
  try {
    inner = decodeBase64ZlibPickle(text);
  } catch (err) {
    const why = err instanceof PickleError ? err.message : String(err);
    throw new RowRejected(`private_test_cases is neither JSON nor base64+zlib+pickle: ${why}`, id);
  }
  if (typeof inner !== 'string') {
    throw new RowRejected('private_test_cases: the pickle does not hold a JSON string (documented shape)', id);
  }
  return parseTests(jsonField(inner, 'private_test_cases (decoded)', id), 'private_test_cases (decoded)', id);
}

function toTestCase(t: LcbTest, where: string, id: string): TestCase {
  if (t.testtype === 'stdin') return { style: 'stdio', input: t.input, output: t.output };
  const lines = t.input.replace(/\n+$/, '');
  const args = lines === '' ? [] : lines.split('\n').map((line, i) => valuesField(line, `${where}.input line ${i + 1}`, id));
  return { style: 'call', args, expected: valuesField(t.output, `${where}.output`, id) };
}

export const liveCodeBenchLoader: DatasetLoader = {
  format: 'livecodebench',
  description: 'LiveCodeBench code_generation_lite JSON lines (private tests may be base64+zlib+pickle)',
  defaultSource: 'livecodebench',
  // LiveCodeBench's harness gives each test 6 s.
  defaultLimits: { timeSeconds: 6, memoryMb: 1024 },
  convert(raw: unknown, ctx: ConvertContext): ProblemInput {
    const row = parseRow(LcbRow, raw);
    const qid = String(row.question_id);
    const publicTests = parseTests(jsonField(row.public_test_cases, 'public_test_cases', qid), 'public_test_cases', qid);
    const privateTests = decodePrivateTests(row.private_test_cases, qid);
    const types = new Set([...publicTests, ...privateTests].map((t) => t.testtype));
    if (types.size === 0) throw new RowRejected('no tests', qid);
    if (types.size > 1) throw new RowRejected('mixes stdin and functional tests', qid);
    const functional = types.has('functional');
    const metadata = row.metadata ? (jsonField(row.metadata, 'metadata', qid) as { func_name?: unknown }) : {};
    const starter = row.starter_code || undefined;
    let entryPoint: string | undefined;
    if (functional) {
      if (typeof metadata?.func_name !== 'string' || metadata.func_name === '') {
        throw new RowRejected('functional tests but metadata has no func_name', qid);
      }
      entryPoint = entryPointFor(metadata.func_name, starter);
    }
    return {
      id: `${ctx.source}/${qid}`,
      source: ctx.source,
      title: row.question_title,
      statement: row.question_content,
      starterCode: starter,
      style: functional ? 'call' : 'stdio',
      entryPoint,
      tests: {
        public: publicTests.map((t, i) => toTestCase(t, `public_test_cases.${i}`, qid)),
        private: privateTests.map((t, i) => toTestCase(t, `private_test_cases.${i}`, qid)),
        generated: [],
      },
      solutions: [],
      incorrectSolutions: [],
      limits: ctx.limits,
      difficulty: row.difficulty ?? undefined,
      tags: [
        ...(row.platform ? [`platform:${row.platform}`] : []),
        ...(row.contest_id != null && row.contest_id !== '' ? [`contest:${row.contest_id}`] : []),
        // Kept so evaluations can select problems released after a model's cutoff.
        ...(row.contest_date ? [`contest-date:${row.contest_date.slice(0, 10)}`] : []),
      ],
    };
  },
};
