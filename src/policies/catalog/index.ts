/** The offline catalog policy: a softmax per context over the demo catalog's candidates. */
export * from './model.js';
export * from './softmax.js';
export * from './suite.js';
export * from './exact.js';
export * from './shared.js';
