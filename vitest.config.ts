import { defineConfig } from 'vitest/config';
import { consoleVitePlugin } from './scripts/lib/console-build.mjs';

export default defineConfig({
  // `botlink:console`, the operator's console that the broker's admin listener serves (scripts/lib/console-build.mjs).
  plugins: [consoleVitePlugin()],
  test: {
    include: ['test/**/*.test.ts'],
    // test/browser runs once, in the long suite (vitest.long.config.ts), where Chromium is one of its tools.
    exclude: ['test/long/**', 'test/package/**', 'test/browser/**'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
  },
});
