import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildBundle } from '../scripts/build.mjs';

declare module 'vitest' {
  interface ProvidedContext {
    /** A folder every uid may enter, for what tests run as another user (test/helpers/bundle.ts); removed after the run. */
    otherUsersRoot: string;
  }
}

// Child-process tests run the real bundle: build it once per test run from the current source.
// The folder for other uids is made here, not in the workers, so that it goes however they end.
export default async function setup(project: TestProject): Promise<() => void> {
  await buildBundle();
  const otherUsersRoot = mkdtempSync(join(tmpdir(), 'botlink-other-uid-'));
  chmodSync(otherUsersRoot, 0o755);
  project.provide('otherUsersRoot', otherUsersRoot);
  return () => rmSync(otherUsersRoot, { recursive: true, force: true });
}
