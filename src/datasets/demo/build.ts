/**
 * Fills the demo problems' expected values from their references, and tops up held-out tests
 * with random valid inputs. Run: `npx tsx src/datasets/demo/build.ts [--heldout 12]`.
 * Hand-written expected values of examples are checked, never overwritten silently.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { rngFor } from '../../policies/rng.js';
import { outcomeValue, runBatch, sameTokens, type RunnerTest } from './runner.js';
import { canonicalJson } from '../../events/canonical-json.js';
import { demoFiles, readDemoFile } from './index.js';
import { printStdio, valuesToArgs } from './input-spec.js';
import { randomValues } from './random-input.js';
import type { DemoEntry, DemoProblemFile } from './schema.js';

function runnerTest(f: DemoProblemFile, e: DemoEntry): RunnerTest {
  return f.style === 'stdio' ? { input: (e as { input: string }).input } : { args: (e as { args: unknown[] }).args };
}

function keyOf(t: RunnerTest): string {
  return canonicalJson(t);
}

async function buildOne(file: string, target: number): Promise<string[]> {
  const f = readDemoFile(file);
  const doc = YAML.parseDocument(readFileSync(file, 'utf8'));
  const notes: string[] = [];
  const base = path.basename(file);
  const job = (tests: RunnerTest[]) => ({
    program: f.reference, style: f.style, entryPoint: f.entryPoint, tests,
    timeSeconds: f.limits.timeSeconds * 2, memoryMb: f.limits.memoryMb,
  });

  // Top up held-out tests with random inputs the reference accepts.
  const seen = new Set([...f.examples, ...f.heldout].map((e) => keyOf(runnerTest(f, e))));
  const rng = rngFor(7, f.id, 'heldout');
  for (let round = 0; round < 10 && f.heldout.length < target; round++) {
    const fresh: RunnerTest[] = [];
    for (let i = 0; i < 40; i++) {
      const v = randomValues(f.input, rng);
      const t: RunnerTest = f.style === 'stdio' ? { input: printStdio(f.input, v) } : { args: valuesToArgs(f.input, v) };
      if (!seen.has(keyOf(t))) {
        seen.add(keyOf(t));
        fresh.push(t);
      }
    }
    const [res] = await runBatch([job(fresh)]);
    fresh.forEach((t, i) => {
      if (res?.[i]?.status === 'ok' && f.heldout.length < target) {
        const entry = 'input' in t ? { input: t.input } : { args: t.args };
        f.heldout.push(entry);
        const node = doc.createNode(entry);
        if (!('input' in t)) (node as YAML.YAMLMap).flow = true;
        doc.addIn(['heldout'], node);
      }
    });
  }

  const parts = ['examples', 'heldout'] as const;
  const all = parts.flatMap((part) => f[part].map((e, i) => ({ part, i, e })));
  const [res] = await runBatch([job(all.map((a) => runnerTest(f, a.e)))]);
  all.forEach(({ part, i, e }, flat) => {
    const outcome = res?.[flat];
    if (!outcome || outcome.status !== 'ok') {
      throw new Error(`${base}: ${part}.${i}: the reference failed (${outcome?.status} ${outcome?.error ?? ''} ${outcome?.message ?? ''})`);
    }
    const value = outcomeValue(f.style, outcome);
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
  for (const file of files) for (const note of await buildOne(file, target)) process.stdout.write(`${note}\n`);
}

main().catch((e: Error) => {
  process.stderr.write(`build: ${e.message}\n`);
  process.exitCode = 1;
});
