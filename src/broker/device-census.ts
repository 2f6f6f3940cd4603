/**
 * Devices by state for /metrics (DESIGN §3.7), counted by the store at most once per `maxAgeMs` however
 * often it is scraped: a scrape flood costs no queries. A stale count is answered while the next is read;
 * a read that fails keeps the last count, and is tried again only after `maxAgeMs`.
 */
import type { Clock } from '../clock.js';
import type { DeviceCounts, Enrollment } from './store/types.js';

export const CENSUS_MAX_AGE_MS = 30_000;

export class DeviceCensus {
  readonly #store: Pick<Enrollment, 'countDevices'>;
  readonly #clock: Pick<Clock, 'monoNow'>;
  readonly #maxAgeMs: number;
  #counts: DeviceCounts | undefined;
  #read: Promise<void> | undefined;
  #readAt = Number.NEGATIVE_INFINITY;

  constructor(store: Pick<Enrollment, 'countDevices'>, clock: Pick<Clock, 'monoNow'>, maxAgeMs = CENSUS_MAX_AGE_MS) {
    this.#store = store;
    this.#clock = clock;
    this.#maxAgeMs = maxAgeMs;
  }

  /** The latest counts; the first call waits for them. Undefined while the store has never answered. */
  async counts(): Promise<DeviceCounts | undefined> {
    const now = this.#clock.monoNow();
    if (now - this.#readAt >= this.#maxAgeMs) {
      this.#readAt = now;
      this.#read = this.#store.countDevices().then(
        (counts) => {
          this.#counts = counts;
        },
        () => undefined,
      );
    }
    if (this.#counts === undefined) await this.#read;
    return this.#counts;
  }
}
