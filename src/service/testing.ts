// The test-only entry to the reference service: the public handle with its controls (every fault,
// push, the audio echo) and the options only tests set (an injected clock). Only test/ and
// scripts/bench import it; `botlink serve` and the demo use server.ts.
import { type ReferenceService, type ServiceFaults, startService, type TestControls, type TestServiceOptions } from './start.js';

export type { ServiceFaults, TestServiceOptions } from './start.js';

/** The running service as a test drives it: the public handle, every fault among its faults. */
export interface TestService extends ReferenceService, TestControls {
  faults: ServiceFaults;
}

/** Starts a service as createReferenceService does, and hands back its controls with it. */
export async function createTestService(opts: TestServiceOptions = {}): Promise<TestService> {
  const { service, controls } = await startService(opts);
  return { ...service, ...controls };
}
