import { describe, expect, it } from 'vitest';
import { DeviceCensus } from '../../../src/broker/device-census.js';
import type { DeviceCounts } from '../../../src/broker/store/types.js';
import { ManualClock } from '../../helpers/manual-clock.js';

/** A store that counts how often it is asked, answering `next` (or failing when it is an Error). */
function countingStore(first: DeviceCounts) {
  const store = {
    asked: 0,
    next: first as DeviceCounts | Error,
    async countDevices(): Promise<DeviceCounts> {
      store.asked += 1;
      if (store.next instanceof Error) throw store.next;
      return store.next;
    },
  };
  return store;
}

const counts = (active: number): DeviceCounts => ({ active, revoked: 1, preauthorized: 2, pending: 3, rejected: 4 });

describe('DeviceCensus: devices by state for /metrics, a query at most every 30 s', () => {
  it('answers a scrape flood from one count, and counts again once 30 s have passed', async () => {
    const clock = new ManualClock();
    const store = countingStore(counts(5));
    const census = new DeviceCensus(store, clock);
    const flood = await Promise.all(Array.from({ length: 100 }, () => census.counts()));
    expect(flood.every((c) => c?.active === 5)).toBe(true);
    expect(store.asked).toBe(1);
    store.next = counts(6);
    await clock.advance(29_999);
    expect((await census.counts())?.active).toBe(5);
    expect(store.asked).toBe(1);
    await clock.advance(1);
    // Stale: answered at once with the last count while the next is read.
    expect((await census.counts())?.active).toBe(5);
    expect(store.asked).toBe(2);
    expect((await census.counts())?.active).toBe(6);
    expect(store.asked).toBe(2);
  });

  it('a store that fails keeps the last count, and is asked again only 30 s later', async () => {
    const clock = new ManualClock();
    const store = countingStore(counts(5));
    store.next = new Error('store down');
    const census = new DeviceCensus(store, clock);
    expect(await census.counts()).toBeUndefined();
    expect(await census.counts()).toBeUndefined();
    expect(store.asked).toBe(1);
    store.next = counts(7);
    await clock.advance(30_000);
    expect(await census.counts()).toEqual(counts(7));
    store.next = new Error('store down');
    await clock.advance(30_000);
    await census.counts();
    expect(await census.counts()).toEqual(counts(7));
    expect(store.asked).toBe(3);
  });
});
