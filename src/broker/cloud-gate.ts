/**
 * At most `limit` cloud calls in flight per replica; the rest wait in order. A burst after an outage
 * (every device of a fleet asking at once) becomes a queue, not a storm against the cloud.
 */
import { Refusal } from './refusal.js';

export interface GateStats {
  inFlight: number;
  queued: number;
  peakInFlight: number;
}

export class CloudGate {
  readonly #limit: number;
  readonly #maxQueue: number;
  readonly #waiting: (() => void)[] = [];
  #inFlight = 0;
  #peak = 0;

  constructor(limit: number, maxQueue: number) {
    this.#limit = limit;
    this.#maxQueue = maxQueue;
  }

  async run<T>(call: () => Promise<T>): Promise<T> {
    if (this.#inFlight >= this.#limit) {
      if (this.#waiting.length >= this.#maxQueue) {
        throw new Refusal('cloud-unreachable', 'the broker is saturated with cloud calls; try again shortly', { retryAfterS: 5 });
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    this.#inFlight++;
    this.#peak = Math.max(this.#peak, this.#inFlight);
    try {
      return await call();
    } finally {
      this.#inFlight--;
      this.#waiting.shift()?.();
    }
  }

  stats(): GateStats {
    return { inFlight: this.#inFlight, queued: this.#waiting.length, peakInFlight: this.#peak };
  }
}
