// The reference service as `botlink serve` and the demo run it. Its test controls (faults, push,
// the audio echo, an injected clock) are not here: tests and benchmarks take them from testing.ts.
import { type ReferenceService, type ReferenceServiceOptions, startService } from './start.js';

export { SERVICE_DEFAULTS } from './defaults.js';
export type { ReferenceService, ReferenceServiceOptions } from './start.js';
export { DISPLACEMENT_MARKERS, type DisplacementMarker } from './ws.js';

/** Starts the service on its host and port (SERVICE_DEFAULTS unless set); resolves once it listens. */
export async function createReferenceService(opts: ReferenceServiceOptions = {}): Promise<ReferenceService> {
  return (await startService(opts)).service;
}
