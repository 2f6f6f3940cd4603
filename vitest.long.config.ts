import { defineConfig } from 'vitest/config';
import { consoleVitePlugin } from './scripts/lib/console-build.mjs';

// The long suites of `npm run test:long` (crash, clocks, duplicate identity, soak, fleet): minutes each; and the
// console in headless Chromium (test/browser), which needs Debian's chromium (scripts/test-tools.sh).
export default defineConfig({
  // `botlink:console`, the operator's console that the broker's admin listener serves (scripts/lib/console-build.mjs).
  plugins: [consoleVitePlugin()],
  test: {
    include: ['test/long/**/*.test.ts', 'test/browser/**/*.test.ts'],
    testTimeout: 15 * 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
