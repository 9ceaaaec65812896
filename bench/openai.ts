/**
 * `crucible bench openai [--seconds S] [--n N] [--max-tokens T] [--concurrency 1,4,16] [--window-ms W]`:
 * samples/s of gpu-bridge `serve` (toy model, CPU, one torch thread) for C concurrent clients,
 * for each C of the list:
 * - serve over HTTP: C loops of fetch + JSON.parse, each asking for n samples of the demo's code
 *   prompt (the server batches what arrives together);
 * - the `openai` policy backend (prompt rendering, HTTP, validation, parsing, records) with C
 *   requests in flight, against the same server;
 * - the baseline, measured in the same run: the same sampling called directly in a gpu-bridge
 *   process over stdio (`generate` with C prompts x n in one call, i.e. the batch C concurrent
 *   requests would make, with no HTTP and no batching window).
 * The three loops alternate in slices so that drift in the machine's load falls on all of them;
 * figures are samples/s, and requests/batch is how many requests serve decoded together on
 * average during the HTTP loop. `--seconds` is per concurrency (a slice runs until its last
 * request is answered, so few long batches stretch it).
 */
import { BridgeClient, startServe } from '../src/bridge/index.js';
import { OpenAIClient, OpenAIPolicy, OpenAIPolicyOptions } from '../src/policies/openai/index.js';
import { loadDemoProblems } from '../src/datasets/demo/index.js';
import { renderPrompt, templateFor } from '../src/policies/openai/prompts.js';

function arg(args: string[], name: string, dflt: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : dflt;
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a number >= 0`);
  return v;
}

function list(args: string[], name: string, dflt: number[]): number[] {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = (args[i + 1] ?? '').split(',').map(Number);
  if (v.length === 0 || !v.every((x) => Number.isInteger(x) && x > 0)) throw new Error(`${name} must be a comma-separated list of positive integers`);
  return v;
}

interface Tally {
  samples: number;
  tokens: number;
  seconds: number;
}

type Once = () => Promise<{ samples: number; tokens: number }>;

async function slice(ms: number, loops: number, once: Once, into: Tally): Promise<void> {
  const end = performance.now() + ms;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (performance.now() < end) {
        const r = await once();
        into.samples += r.samples;
        into.tokens += r.tokens;
      }
    }),
  );
  into.seconds += (performance.now() - t0) / 1000;
}

const rate = (t: Tally) => t.samples / t.seconds;

export async function runBench(args: string[]): Promise<void> {
  const seconds = arg(args, '--seconds', 30);
  const n = arg(args, '--n', 4);
  const maxTokens = arg(args, '--max-tokens', 64);
  const concurrencies = list(args, '--concurrency', [1, 4, 16]);
  const windowMs = arg(args, '--window-ms', 5);
  const serve = await startServe({ backend: 'toy', seed: 0, threads: 1, batchWindowMs: windowMs });
  const { client: bridge } = await BridgeClient.start({ args: ['--threads', '1'] });
  try {
    await bridge.loadPolicy({ backend: 'toy', seed: 0 }); // the same default toy model as serve's
    const problem = loadDemoProblems()[0]!;
    const prompt = renderPrompt(templateFor('code-a1', 'code', false), {
      statement: problem.statement,
      style: problem.style,
      entryPoint: problem.entryPoint,
      suiteSize: 8,
    }).text;
    const line = (s: string) => process.stdout.write(s + '\n');
    const health = async () => (await (await fetch(serve.baseUrl.replace(/\/v1$/, '/health'))).json()) as { requests: number; batches: number };
    line(
      `gpu-bridge serve (toy, CPU, 1 torch thread), samples/s, n=${n}, max_tokens=${maxTokens}, prompt ${Buffer.byteLength(prompt)} bytes, batch window ${windowMs} ms`,
    );
    line(
      `${'clients'.padStart(7)} ${'serve HTTP'.padStart(11)} ${'openai backend'.padStart(15)} ${'direct bridge'.padStart(14)} ${'serve/direct'.padStart(13)} ${'requests/batch'.padStart(15)}`,
    );
    for (const c of concurrencies) {
      const options = OpenAIPolicyOptions.parse({ baseUrl: serve.baseUrl, model: serve.model, maxTokens, concurrency: c, timeoutMs: 300_000 });
      const client = new OpenAIClient(options);
      const policy = new OpenAIPolicy({ client, role: 'code', method: 'code-a1', problems: new Map([[problem.id, problem]]), suiteSize: 8 });
      let seed = 0;
      const http: Once = async () => {
        const res = await fetch(client.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(client.body({ prompt, n, seed: seed++ })),
        });
        const body = (await res.json()) as { choices: { token_ids: number[] }[] };
        return { samples: body.choices.length, tokens: body.choices.reduce((s, x) => s + x.token_ids.length, 0) };
      };
      const backend: Once = async () => {
        const gens = await policy.generate({
          role: 'code',
          version: 0,
          seed: seed++,
          n,
          prompts: [{ key: problem.id, prompt: problem.statement, context: { problemId: problem.id } }],
        });
        return { samples: gens.length, tokens: gens.reduce((s, g) => s + (g.record?.tokenIds?.length ?? 0), 0) };
      };
      const direct: Once = async () => {
        const g = await bridge.generate({ prompts: Array.from({ length: c }, () => prompt), n, max_tokens: maxTokens, temperature: 1, seed: seed++ });
        return { samples: g.outputs.flat().length, tokens: g.tokens };
      };
      // Warm each path (first-call costs: imports, allocator, connections) outside the measurement.
      await Promise.all(Array.from({ length: c }, () => http()));
      await backend();
      await direct();
      const a: Tally = { samples: 0, tokens: 0, seconds: 0 };
      const b: Tally = { samples: 0, tokens: 0, seconds: 0 };
      const d: Tally = { samples: 0, tokens: 0, seconds: 0 };
      const slices = 3;
      const ms = (seconds * 1000) / (3 * slices);
      const batched = { requests: 0, batches: 0 };
      for (let i = 0; i < slices; i++) {
        const h0 = await health();
        await slice(ms, c, http, a);
        const h1 = await health();
        batched.requests += h1.requests - h0.requests;
        batched.batches += h1.batches - h0.batches;
        await slice(ms, c, backend, b);
        await slice(ms, 1, direct, d);
      }
      line(
        `${String(c).padStart(7)} ${rate(a).toFixed(1).padStart(11)} ${rate(b).toFixed(1).padStart(15)} ${rate(d).toFixed(1).padStart(14)} ${(rate(a) / rate(d)).toFixed(2).padStart(13)} ${(batched.requests / batched.batches).toFixed(1).padStart(15)}`,
      );
    }
  } finally {
    await serve.close();
    await bridge.shutdown();
  }
}
