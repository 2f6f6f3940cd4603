import { defineConfig } from 'vitest/config';

// `npm run test:package`: the Debian packages `npm run package` built (lintian, the layout, the
// maintainer scripts in a scratch root, a run from the installed files, the arm64 one under QEMU).
export default defineConfig({
  test: {
    include: ['test/package/**/*.test.ts'],
    testTimeout: 240_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
