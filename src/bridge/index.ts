export * from './errors.js';
export * from './protocol.js';
export * from './client.js';
export * from './batch.js';
export * from './serve-process.js';
export * from './checkpoint-blobs.js';
export * from './checkpoint-cache.js';
export * from './trainer-code.js';
