import { defineConfig } from 'vitest/config';

// The long suites of `npm run test:long` (crash, clocks, duplicate identity, soak, fleet): minutes each.
export default defineConfig({
  test: {
    include: ['test/long/**/*.test.ts'],
    testTimeout: 15 * 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
