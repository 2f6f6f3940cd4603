import { defineConfig } from 'vitest/config';

// The long suites of `npm run test:long` (crash, clocks, duplicate identity, soak, fleet): minutes each; and the
// console in headless Chromium (test/browser), which needs Debian's chromium (scripts/test-tools.sh).
export default defineConfig({
  test: {
    include: ['test/long/**/*.test.ts', 'test/browser/**/*.test.ts'],
    testTimeout: 15 * 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
