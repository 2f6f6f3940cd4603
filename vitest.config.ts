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
    // Two files at a time on CI's 2 cores (vitest's default is one fewer than the cores): the suite mostly waits on
    // children, sockets and timers (~0.5 core busy with one worker), so two halve its wall time (10.4 → 6.5 min
    // measured on a loaded machine, every test green), and CI runs it on three Node majors.
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
