/** Policies sampled from an OpenAI-compatible server: options, client, prompts, parsing. */
export * from './config.js';
export * from './errors.js';
export * from './http.js';
export * from './parse.js';
export * from './prompts.js';
export * from './policy.js';
