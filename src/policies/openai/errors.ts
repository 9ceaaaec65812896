/** Errors of the OpenAI-compatible policy backend. */
import type { RequestFailure } from './http.js';

/** Every try of a request failed (or one failed in a way a retry cannot fix): the failures say how. */
export class ModelRequestError extends Error {
  constructor(
    readonly url: string,
    readonly failures: readonly RequestFailure[],
  ) {
    const last = failures[failures.length - 1];
    super(`${url}: ${failures.length} tr${failures.length === 1 ? 'y' : 'ies'} failed; last: ${last ? `${last.kind}: ${last.message}` : 'none'}`);
    this.name = 'ModelRequestError';
  }
}

/** A prompt template that does not exist, or a template rendered without a field it needs. */
export class PromptTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PromptTemplateError';
  }
}
