import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Most of the suite's time is spent waiting on real processes, timers and sockets, not computing (a serial
    // run used about half of one core), so it runs twice as many test files at once as there are cores. Each
    // worker draws its ports from a block of its own (test/helpers/ports.mjs).
    maxWorkers: Math.max(2, availableParallelism() * 2),
    globalSetup: ['test/globalSetup.ts'],
    setupFiles: ['test/setup.ts'],
  },
});
