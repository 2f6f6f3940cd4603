import { randomUUID } from 'node:crypto';
import type { BrokerStore } from '../../src/broker/store/types.js';

/** Takes (keyId, nonce) as an enrollment's spend does, under no limit: true when no replica had seen it. */
export async function takeNonce(store: BrokerStore, keyId: string, nonce: string, keepUntil: number): Promise<boolean> {
  return !(await store.spend({ keyId, nonce, keepUntil })).replayed;
}

/** One more hit in `bucket`'s window starting at `start` (a spend with a nonce of its own): the count after it. */
export async function hitIn(store: BrokerStore, bucket: string, start: number): Promise<number> {
  const spent = await store.spend({
    keyId: 'hits',
    nonce: randomUUID(),
    keepUntil: Date.now() + 60_000,
    window: { bucket, start, limit: Number.MAX_SAFE_INTEGER },
  });
  if (spent.replayed || spent.count === undefined) throw new Error('a fresh nonce was refused, or nothing was counted');
  return spent.count;
}
