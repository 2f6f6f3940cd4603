import { buildBundle } from '../scripts/build.mjs';

// Child-process tests run the real bundle: build it once per test run from the current source.
export default async function setup(): Promise<void> {
  await buildBundle();
}
