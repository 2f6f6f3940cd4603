/** The vendors' access tokens the broker registers devices with, held in memory: a cache, not a rule. */
import type { CloudClient } from '../cloud/client.js';
import type { Clock } from '../clock.js';
import type { CloudGate } from './cloud-gate.js';

/** A vendor token with less than this left is fetched again before a registration. */
const MARGIN_MS = 120_000;

export class VendorTokens {
  readonly #cloud: CloudClient;
  readonly #gate: CloudGate;
  readonly #clock: Clock;
  readonly #held = new Map<string, Promise<{ token: string; expiresAt: number }>>();

  constructor(cloud: CloudClient, gate: CloudGate, clock: Clock) {
    this.#cloud = cloud;
    this.#gate = gate;
    this.#clock = clock;
  }

  /** The vendor's access token; one getToken at a time per vendor. */
  async get(vendorId: string): Promise<string> {
    const held = this.#held.get(vendorId);
    if (held) {
      const ready = await held.catch(() => undefined);
      if (ready && ready.expiresAt - this.#clock.wallNow() > MARGIN_MS) return ready.token;
      if (this.#held.get(vendorId) !== held) return this.get(vendorId);
    }
    const fetching = this.#gate
      .run(() => this.#cloud.getToken({ kind: 'vendor', id: vendorId }, this.#clock.wallNow()))
      .then((pair) => ({ token: pair.accessToken, expiresAt: this.#clock.wallNow() + pair.expireIn * 1000 }));
    this.#held.set(vendorId, fetching);
    fetching.catch(() => {
      if (this.#held.get(vendorId) === fetching) this.#held.delete(vendorId);
    });
    return (await fetching).token;
  }

  /** After the cloud refused a registration with the held token: fetch a new one next time. */
  forget(vendorId: string): void {
    this.#held.delete(vendorId);
  }
}
