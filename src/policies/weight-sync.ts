/**
 * Weight sync: after the Learner publishes a version, the server that samples the role is told
 * to serve it. Three kinds of server, each with its own request:
 * - gpu-bridge serve: POST /admin/load_version {path, sha256} (loads only a stable checkpoint
 *   whose manifest hash matches);
 * - vLLM with LoRA: POST /v1/load_lora_adapter {lora_name, lora_path}, one adapter name per
 *   version, so samples of a version name its adapter as their model and an old version's
 *   samples can never come from new weights by accident;
 * - SGLang: POST /update_weights_from_disk {model_path} (the served model name stays).
 * Each call returns what was sent and answered, for the log (WeightsSynced).
 */
import { z } from 'zod';
import { PolicyInputError } from './port.js';

export type WeightSyncKind = 'bridge' | 'vllm-lora' | 'sglang';

export interface WeightSyncTarget {
  kind: WeightSyncKind;
  /** The server's root URL (without /v1). */
  serverUrl: string;
  /** Bearer token (bridge: the admin token; vLLM/SGLang: the API key), or null. */
  token: string | null;
  /** The model name the server was started with (what bridge and SGLang keep serving). */
  baseModel: string;
  /** vllm-lora: adapter names are `<prefix>-v<version>`. */
  prefix: string;
}

export interface WeightSyncRecord {
  kind: WeightSyncKind;
  url: string;
  request: Record<string, unknown>;
  status: number;
  servedModel: string;
}

/** The model name a version's samples ask the server for. */
export function servedModelFor(target: WeightSyncTarget, version: number): string {
  return target.kind === 'vllm-lora' ? `${target.prefix}-v${version}` : target.baseModel;
}

const SglangAnswer = z.object({ success: z.boolean(), message: z.string().optional() });

/** Loads a published checkpoint into the server; throws (naming the server, the checkpoint and
 * the answer) when the server refuses it. */
export async function syncWeights(target: WeightSyncTarget, checkpoint: { path: string; sha256: string }, version: number): Promise<WeightSyncRecord> {
  const root = target.serverUrl.replace(/\/+$/, '');
  const servedModel = servedModelFor(target, version);
  const [url, request] =
    target.kind === 'bridge'
      ? [`${root}/admin/load_version`, { path: checkpoint.path, sha256: checkpoint.sha256 }]
      : target.kind === 'vllm-lora'
        ? [`${root}/v1/load_lora_adapter`, { lora_name: servedModel, lora_path: checkpoint.path }]
        : [`${root}/update_weights_from_disk`, { model_path: checkpoint.path }];
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(target.token ? { authorization: `Bearer ${target.token}` } : {}) },
      body: JSON.stringify(request),
    });
  } catch (e) {
    throw new PolicyInputError(`${url}: weight sync of ${checkpoint.path} (version ${version}) could not reach the server: ${(e as Error).message}`);
  }
  const text = await res.text();
  const fail = () => new PolicyInputError(`${url}: weight sync of ${checkpoint.path} (version ${version}) refused: HTTP ${res.status} ${text.slice(0, 300)}`);
  // vLLM answers 400 to an adapter name it already holds: after a restart the same version is
  // synced again, and the adapter it holds under that name is the one this version published.
  const alreadyLoaded = target.kind === 'vllm-lora' && res.status === 400 && /already been loaded/i.test(text);
  if (!res.ok && !alreadyLoaded) throw fail();
  if (target.kind === 'sglang') {
    let answer: z.infer<typeof SglangAnswer> | null = null;
    try {
      answer = SglangAnswer.parse(JSON.parse(text));
    } catch {
      throw fail();
    }
    if (!answer.success) throw fail();
  }
  return { kind: target.kind, url, request, status: res.status, servedModel };
}
