import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: files in parallel would fight over the sandbox and nats-server.
    fileParallelism: false,
    pool: 'forks',
  },
});
