/**
 * Requests refused before their signature verified (DESIGN §3.7), counted per source (IPv6 by /64) and
 * minute in this replica's memory — never in the store, which such a request must not touch. Past the
 * limit, for the rest of that minute, a source's requests whose key the replica does not hold in memory
 * are refused without reading the store: a device that asked before is not shut out by its neighbours.
 */
import { Refusal } from '../refusal.js';
import { addressBucket } from './limits.js';

const MINUTE_MS = 60_000;
/** Sources counted in one minute at most: past it, new ones share one count, so a spread flood costs a bounded map. */
export const MAX_SOURCES = 100_000;
const SPREAD = '*';

export class UnsignedRefusals {
  readonly #perMinute: number;
  readonly #maxSources: number;
  #minute = Number.NaN;
  readonly #bySource = new Map<string, number>();

  constructor(perMinute: number, maxSources = MAX_SOURCES) {
    this.#perMinute = perMinute;
    this.#maxSources = maxSources;
  }

  /** One more refusal of an unsigned request from `source`. */
  count(source: string, now: number): void {
    this.#roll(now);
    let bucket = addressBucket(source);
    if (!this.#bySource.has(bucket) && this.#bySource.size >= this.#maxSources) bucket = SPREAD;
    this.#bySource.set(bucket, (this.#bySource.get(bucket) ?? 0) + 1);
  }

  /** 429 with Retry-After to the minute's end while `source` (or the spread) is past the limit this minute. */
  refuseIfOver(source: string, now: number): void {
    this.#roll(now);
    const bucket = addressBucket(source);
    const count = this.#bySource.get(bucket) ?? (this.#bySource.size >= this.#maxSources ? (this.#bySource.get(SPREAD) ?? 0) : 0);
    if (count <= this.#perMinute) return;
    throw new Refusal('rate-limited', `more than ${this.#perMinute} unsigned requests from this source in a minute`, {
      retryAfterS: Math.max(1, Math.ceil((this.#minute + MINUTE_MS - now) / 1000)),
    });
  }

  get sources(): number {
    return this.#bySource.size;
  }

  #roll(now: number): void {
    const minute = Math.floor(now / MINUTE_MS) * MINUTE_MS;
    if (minute === this.#minute) return;
    this.#minute = minute;
    this.#bySource.clear();
  }
}
