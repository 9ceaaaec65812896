import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: files in parallel would fight over the sandbox and nats-server.
    fileParallelism: false,
    pool: 'forks',
    // The demo catalogs built by the runs of one `vitest run`, shared by its test files.
    globalSetup: ['test/support/global-setup.ts'],
  },
});
