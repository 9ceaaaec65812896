/**
 * StandInOpenAIServer: a stand-in for a real OpenAI-compatible model server (vLLM, SGLang), for
 * tests that cannot start one. It answers /v1/completions and /v1/chat/completions with texts
 * from a function the test gives, and can be told to misbehave on chosen requests: malformed
 * JSON, an HTTP status, no choices, the wrong number of choices, or a hang (headers never sent).
 * Every request body it received is kept, with the fault it answered with.
 *
 * It also stands in for the weight-sync endpoints of vLLM (POST /v1/load_lora_adapter: 200, or
 * 400 "already been loaded" for a name it holds) and SGLang (POST /update_weights_from_disk:
 * {success, message}), recording each call; it loads nothing.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault = 'malformed-json' | 'http-500' | 'http-400' | 'empty-choices' | 'wrong-n' | 'hang' | 'bad-shape';

export interface StandInRequest {
  path: string;
  body: Record<string, unknown>;
  fault: Fault | null;
}

export interface StandInAnswerContext {
  prompt: string;
  n: number;
  seed: number | null;
  /** Requests answered so far (faults included). */
  served: number;
}

export class StandInOpenAIServer {
  readonly requests: StandInRequest[] = [];
  /** Faults answered in order, one per request, before normal answers resume. */
  faults: Fault[] = [];
  readonly #server: http.Server;
  readonly #hung: http.ServerResponse[] = [];

  private constructor(
    readonly answer: (ctx: StandInAnswerContext) => string[],
    readonly fingerprint: string,
  ) {
    this.#server = http.createServer((req, res) => void this.#handle(req, res));
  }

  static async start(answer: (ctx: StandInAnswerContext) => string[], opts: { fingerprint?: string } = {}): Promise<StandInOpenAIServer> {
    const s = new StandInOpenAIServer(answer, opts.fingerprint ?? 'v0');
    await new Promise<void>((resolve) => s.#server.listen(0, '127.0.0.1', resolve));
    return s;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1`;
  }

  /** vLLM stand-in: LoRA adapter names loaded so far, in order. */
  readonly adapters: string[] = [];

  #send(res: http.ServerResponse, status: number, text: string): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(text);
  }

  async close(): Promise<void> {
    for (const r of this.#hung) r.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
    const path = req.url ?? '';
    const fault = this.faults.shift() ?? null;
    this.requests.push({ path, body, fault });
    if (path === '/v1/load_lora_adapter') {
      const name = String(body.lora_name);
      if (this.adapters.includes(name)) return void this.#send(res, 400, `{"object":"error","message":"The lora adapter '${name}' has already been loaded."}`);
      this.adapters.push(name);
      return void this.#send(res, 200, `Success: LoRA adapter '${name}' added successfully.`);
    }
    if (path === '/update_weights_from_disk')
      return void this.#send(res, 200, JSON.stringify({ success: true, message: `stand-in: weights of ${String(body.model_path)} noted` }));
    const chat = path.endsWith('/chat/completions');
    const prompt = chat ? String((body.messages as { content: string }[])[0]?.content ?? '') : String(body.prompt);
    const n = Number(body.n ?? 1);
    const send = (status: number, text: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(text);
    };
    switch (fault) {
      case 'hang':
        this.#hung.push(res);
        return;
      case 'malformed-json':
        return send(200, '{"choices": [{"text": "def f(');
      case 'http-500':
        return send(500, '{"error": {"message": "stand-in: internal error"}}');
      case 'http-400':
        return send(400, '{"error": {"message": "stand-in: bad request"}}');
      case 'bad-shape':
        return send(200, '{"choices": "none"}');
      case 'empty-choices':
        return send(200, JSON.stringify({ model: body.model, choices: [] }));
      default:
    }
    const texts = this.answer({ prompt, n, seed: typeof body.seed === 'number' ? body.seed : null, served: this.requests.length - 1 });
    const count = fault === 'wrong-n' ? Math.max(1, n - 1) : n;
    const choices = Array.from({ length: count }, (_, i) => {
      const text = texts[i % texts.length] ?? '';
      // Token ids and log-probs as a byte-level model would give them.
      const ids = [...Buffer.from(text, 'utf8')];
      const logprobs = ids.map((b) => -((b % 7) + 1) / 10);
      return chat
        ? {
            index: i,
            message: { role: 'assistant', content: text },
            finish_reason: 'stop',
            logprobs: body.logprobs ? { content: ids.map((b, j) => ({ token: String(b), logprob: logprobs[j] })) } : null,
            token_ids: ids,
          }
        : { index: i, text, finish_reason: 'stop', logprobs: body.logprobs ? { tokens: ids.map(String), token_logprobs: logprobs } : null, token_ids: ids };
    });
    send(200, JSON.stringify({ id: `stand-in-${this.requests.length}`, model: body.model, system_fingerprint: this.fingerprint, choices }));
  }
}
