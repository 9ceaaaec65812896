/**
 * `crucible bench openai [--seconds S] [--n N] [--max-tokens T] [--concurrency C]`: samples/s and
 * tokens/s through the `openai` policy backend (prompt rendering, HTTP, validation, parsing,
 * records) against gpu-bridge `serve` with the toy model on CPU, beside a direct HTTP loop
 * (fetch + JSON.parse, the same prompt and body) against the same server in the same run: the
 * difference is the backend's overhead. The two loops alternate in slices so that drift in the
 * machine's load falls on both.
 */
import { startServe } from '../src/bridge/index.js';
import { OpenAIClient, OpenAIPolicy, OpenAIPolicyOptions } from '../src/policies/openai/index.js';
import { loadDemoProblems } from '../src/datasets/demo/index.js';
import { renderPrompt, templateFor } from '../src/policies/openai/prompts.js';

function arg(args: string[], name: string, dflt: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : dflt;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);
  return v;
}

interface Tally {
  samples: number;
  tokens: number;
  seconds: number;
}

async function slice(ms: number, concurrency: number, once: () => Promise<{ samples: number; tokens: number }>, into: Tally): Promise<void> {
  const end = performance.now() + ms;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const r = await once();
        into.samples += r.samples;
        into.tokens += r.tokens;
      }
    }),
  );
  into.seconds += (performance.now() - t0) / 1000;
}

export async function runBench(args: string[]): Promise<void> {
  const seconds = arg(args, '--seconds', 20);
  const n = arg(args, '--n', 4);
  const maxTokens = arg(args, '--max-tokens', 64);
  const concurrency = arg(args, '--concurrency', 1);
  const serve = await startServe({ backend: 'toy', seed: 0 });
  try {
    const problems = loadDemoProblems();
    const problem = problems[0]!;
    const options = OpenAIPolicyOptions.parse({ baseUrl: serve.baseUrl, model: serve.model, maxTokens, concurrency, timeoutMs: 120_000 });
    const client = new OpenAIClient(options);
    const policy = new OpenAIPolicy({ client, role: 'code', method: 'code-a1', problems: new Map([[problem.id, problem]]), suiteSize: 8 });
    let seed = 0;
    const viaBackend = async () => {
      const gens = await policy.generate({
        role: 'code',
        version: 0,
        seed: seed++,
        n,
        prompts: [{ key: problem.id, prompt: problem.statement, context: { problemId: problem.id } }],
      });
      return { samples: gens.length, tokens: gens.reduce((s, g) => s + (g.record?.tokenIds?.length ?? 0), 0) };
    };
    const prompt = renderPrompt(templateFor('code-a1', 'code', false), {
      statement: problem.statement,
      style: problem.style,
      entryPoint: problem.entryPoint,
      suiteSize: 8,
    }).text;
    const direct = async () => {
      const res = await fetch(client.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(client.body({ prompt, n, seed: seed++ })),
      });
      const body = (await res.json()) as { choices: { token_ids: number[] }[] };
      return { samples: body.choices.length, tokens: body.choices.reduce((s, c) => s + c.token_ids.length, 0) };
    };
    // Warm both paths (first-call costs: imports, allocator) outside the measurement.
    await viaBackend();
    await direct();
    const a: Tally = { samples: 0, tokens: 0, seconds: 0 };
    const b: Tally = { samples: 0, tokens: 0, seconds: 0 };
    const slices = 4;
    for (let i = 0; i < slices; i++) {
      await slice((seconds * 1000) / (2 * slices), concurrency, viaBackend, a);
      await slice((seconds * 1000) / (2 * slices), concurrency, direct, b);
    }
    const row = (name: string, t: Tally) =>
      `${name.padEnd(26)} ${String(t.samples).padStart(8)} ${(t.samples / t.seconds).toFixed(2).padStart(10)} ${(t.tokens / t.seconds).toFixed(1).padStart(10)}`;
    console.log(`openai backend vs direct HTTP, gpu-bridge serve (toy, CPU), n=${n}, max_tokens=${maxTokens}, concurrency=${concurrency}, ${seconds}s in all`);
    console.log(`${'path'.padEnd(26)} ${'samples'.padStart(8)} ${'samples/s'.padStart(10)} ${'tokens/s'.padStart(10)}`);
    console.log(row('openai backend', a));
    console.log(row('direct HTTP (baseline)', b));
    console.log(`backend / direct samples/s: ${(a.samples / a.seconds / (b.samples / b.seconds)).toFixed(3)}`);
  } finally {
    await serve.close();
  }
}
