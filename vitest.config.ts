import { defineConfig } from 'vitest/config';
import { consoleVitePlugin } from './scripts/lib/console-build.mjs';

export default defineConfig({
  // `botlink:console`, the operator's console that the broker's admin listener serves (scripts/lib/console-build.mjs).
  plugins: [consoleVitePlugin()],
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/long/**', 'test/package/**'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
  },
});
