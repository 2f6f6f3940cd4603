import type { KeyObject } from 'node:crypto';

/** Keys kept by default: 1.1 KiB each (the KeyObject and OpenSSL's key, measured), so 4.4 MiB at most. */
export const KEY_CACHE_ENTRIES = 4096;

/** A device key as imported to verify with, beside the stored text it came from. */
export interface CachedKey {
  key: KeyObject;
  /** The stored public key (base64url): the store writes for a request only while it is still the key's. */
  publicKey: string;
  /** The key's botId, which never changes: the limits that count per botId count before the store is read. */
  botId: string;
  /** Its device, which never changes either: the audit of a refusal names it without a read. */
  device: { vendorId: string; deviceId: string };
}

/**
 * The public keys of the devices that asked last, by keyId, least recently used dropped first. It saves
 * a token request the store read before its signature check; never a decision: whether the key is still
 * active, and still this public key, is read in the step that writes the request's nonce
 * (BrokerStore.spendVerified), so a revocation holds at once.
 */
export class KeyCache {
  readonly #max: number;
  readonly #entries = new Map<string, CachedKey>();

  constructor(max = KEY_CACHE_ENTRIES) {
    this.#max = max;
  }

  get(keyId: string): CachedKey | undefined {
    const entry = this.#entries.get(keyId);
    if (entry !== undefined) {
      // A Map iterates in insertion order: moving the entry to the end keeps the oldest first.
      this.#entries.delete(keyId);
      this.#entries.set(keyId, entry);
    }
    return entry;
  }

  set(keyId: string, entry: CachedKey): void {
    this.#entries.delete(keyId);
    this.#entries.set(keyId, entry);
    if (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value as string);
  }

  /** Whether the key is held, leaving its place in the order as it is. */
  has(keyId: string): boolean {
    return this.#entries.has(keyId);
  }

  delete(keyId: string): void {
    this.#entries.delete(keyId);
  }

  get size(): number {
    return this.#entries.size;
  }
}
