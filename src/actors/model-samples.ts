/**
 * The events that record how a model backend drew a sample: its ModelSampled (prompt, answer and
 * tokens as blobs) and the failed tries of its request. Written in the same commit as the sample
 * itself, so a sample and its record are never apart. Catalog generations carry no record.
 */
import type { NewEvent } from '../events/envelope.js';
import type { PolicyRef } from '../events/catalog.js';
import type { Generation } from '../policies/port.js';
import type { RunEnv } from './env.js';

export async function modelSampleEvents(env: RunEnv, g: Generation, sampleId: string, policy: PolicyRef): Promise<NewEvent[]> {
  const r = g.record;
  if (!r) return [];
  const events: NewEvent[] = [];
  for (const f of r.failures) {
    events.push(env.event('ModelRequestFailed', { requestId: r.requestId, role: policy.role, ...f }));
  }
  const tokensHash = r.tokenIds || r.tokenLogprobs ? await env.blobs.put(JSON.stringify({ tokenIds: r.tokenIds, tokenLogprobs: r.tokenLogprobs })) : null;
  events.push(
    env.event('ModelSampled', {
      sampleId,
      role: policy.role,
      policy,
      requestId: r.requestId,
      index: g.index,
      template: r.template,
      promptHash: await env.blobs.put(r.prompt),
      responseHash: await env.blobs.put(r.response),
      tokensHash,
      params: r.params,
      seed: r.seed,
      served: r.served,
      finishReason: r.finishReason,
      parse: r.parse,
    }),
  );
  return events;
}
