/**
 * Fills the demo problems' expected values from their references, and tops up held-out tests
 * with random valid inputs. Run: `npx tsx src/datasets/demo/build.ts [--heldout 12]`.
 * Hand-written expected values of examples are checked, never overwritten silently.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { Rng } from '../../core/rng.js';
import { canonicalJson } from '../../core/canonical-json.js';
import type { TestCase } from '../../core/problem.js';
import type { Sandbox } from '../../sandbox/api.js';
import { createSandbox } from '../../sandbox/index.js';
import { demoFiles, readDemoFile } from './index.js';
import { printStdio, valuesToArgs } from './input-spec.js';
import { randomValues } from './random-input.js';
import type { DemoEntry, DemoProblemFile } from './schema.js';

function inputOf(f: DemoProblemFile, e: DemoEntry): TestCase {
  return f.style === 'stdio'
    ? { style: 'stdio', input: (e as { input: string }).input, output: null }
    : { style: 'call', args: (e as { args: unknown[] }).args };
}

function keyOf(t: TestCase): string {
  return canonicalJson(t);
}

function sameTokens(a: string, b: string): boolean {
  const ta = a.split(/\s+/).filter(Boolean);
  const tb = b.split(/\s+/).filter(Boolean);
  return ta.length === tb.length && ta.every((t, i) => t === tb[i]);
}

/** The reference's verdict and value per test, through the sandbox (twice the time limit). */
async function runReference(f: DemoProblemFile, sandbox: Sandbox, tests: TestCase[]) {
  const results = await sandbox.run({
    program: f.reference,
    role: 'reference',
    tests,
    entryPoint: f.entryPoint,
    limits: { timeSeconds: f.limits.timeSeconds * 2, memoryMb: f.limits.memoryMb },
  });
  return tests.map((_, i) => {
    const r = results.find((x) => x.test === i);
    if (!r || r.verdict !== 'accepted' || r.output === undefined)
      return { ok: false as const, why: `${r?.verdict ?? 'no result'} ${r?.exceptionType ?? ''} ${r?.message ?? ''}` };
    const value = f.style === 'stdio' ? r.output : (JSON.parse(r.output) as unknown);
    // JSON numbers past 2^53 are rounded when read: such a value cannot be stored exactly.
    if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value))
      return { ok: false as const, why: `result ${r.output} is past 2^53` };
    return { ok: true as const, value };
  });
}

async function buildOne(file: string, target: number, sandbox: Sandbox): Promise<string[]> {
  const f = readDemoFile(file);
  const doc = YAML.parseDocument(readFileSync(file, 'utf8'));
  const notes: string[] = [];
  const base = path.basename(file);
  // Top up held-out tests with random inputs the reference accepts.
  const seen = new Set([...f.examples, ...f.heldout].map((e) => keyOf(inputOf(f, e))));
  const rng = Rng.derive(7, f.id, 'heldout');
  for (let round = 0; round < 10 && f.heldout.length < target; round++) {
    const fresh: TestCase[] = [];
    for (let i = 0; i < 40; i++) {
      const v = randomValues(f.input, rng);
      const t: TestCase =
        f.style === 'stdio' ? { style: 'stdio', input: printStdio(f.input, v), output: null } : { style: 'call', args: valuesToArgs(f.input, v) };
      if (!seen.has(keyOf(t))) {
        seen.add(keyOf(t));
        fresh.push(t);
      }
    }
    const res = await runReference(f, sandbox, fresh);
    fresh.forEach((t, i) => {
      if (res[i]?.ok && f.heldout.length < target) {
        const entry = t.style === 'stdio' ? { input: t.input } : { args: (t as { args: unknown[] }).args };
        f.heldout.push(entry);
        const node = doc.createNode(entry);
        if (t.style !== 'stdio') (node as YAML.YAMLMap).flow = true;
        doc.addIn(['heldout'], node);
      }
    });
  }

  const parts = ['examples', 'heldout'] as const;
  const all = parts.flatMap((part) => f[part].map((e, i) => ({ part, i, e })));
  const res = await runReference(
    f,
    sandbox,
    all.map((a) => inputOf(f, a.e)),
  );
  all.forEach(({ part, i, e }, flat) => {
    const outcome = res[flat]!;
    if (!outcome.ok) throw new Error(`${base}: ${part}.${i}: the reference failed (${outcome.why.trim()})`);
    const value = outcome.value;
    const field = f.style === 'stdio' ? 'output' : 'expected';
    const stated = (e as Record<string, unknown>)[field];
    const agrees = stated !== undefined && (f.style === 'stdio' ? sameTokens(String(stated), String(value)) : canonicalJson(stated) === canonicalJson(value));
    if (stated !== undefined && !agrees) {
      if (part === 'examples') throw new Error(`${base}: examples.${i}: stated ${JSON.stringify(stated)} but the reference gives ${JSON.stringify(value)}`);
      notes.push(`${base}: heldout.${i}: expected changed to ${JSON.stringify(value)}`);
    }
    if (!agrees) doc.setIn([part, i, field], value);
  });
  writeFileSync(file, doc.toString({ lineWidth: 0 }));
  notes.push(`${base}: ${f.examples.length} examples, ${f.heldout.length} held-out`);
  return notes;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const at = argv.indexOf('--heldout');
  const target = at >= 0 ? Number(argv[at + 1]) : 12;
  const only = argv.filter((a, i) => !a.startsWith('--') && (at < 0 || i !== at + 1));
  const files = demoFiles().filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
  const sandbox = await createSandbox();
  try {
    for (const file of files) for (const note of await buildOne(file, target, sandbox)) process.stdout.write(`${note}\n`);
  } finally {
    await sandbox.close();
  }
}

main().catch((e: Error) => {
  process.stderr.write(`build: ${e.message}\n`);
  process.exitCode = 1;
});
