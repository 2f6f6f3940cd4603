/**
 * What the admin API's pending routes (routes-pending.ts) need of code-less enrollment (DESIGN §3.7): its queue, accept
 * (the enrollment), reject and bulk reject — the store's and enrollment's own functions, wired in by the broker.
 */
import type { Operator } from '../operator.js';
import type { DeviceAfter, PendingPageItem } from '../store/admin-types.js';

/** §3.8's pending item: the store's page line as it is. */
export type PendingItem = PendingPageItem;

export interface PendingFilter {
  vendorId?: string | undefined;
  /** A literal prefix of the deviceId. */
  q?: string | undefined;
  /** An address or a CIDR block of the first ask's source. */
  source?: string | undefined;
}

/** Where a pending page starts: after this row (its order: vendorId, deviceId, keyId; with q deviceId first). */
export type PendingAfter = DeviceAfter;

/** What the pending routes need of code-less enrollment; its errors may be Refusals (409, 502, 503), which the listener maps. */
export interface PendingBook {
  listPending(filter: PendingFilter, after: PendingAfter | null, limit: number): Promise<PendingItem[]>;
  /** The enrollment of the key as `deviceId` (the operator's expectation: a mismatch is 409); its botId. */
  accept(keyId: string, deviceId: string, by: Operator): Promise<{ botId: string }>;
  /** false: no pending key has this keyId. */
  reject(keyId: string, by: Operator): Promise<boolean>;
  /** Every pending key of the filter, in one transaction: how many. */
  rejectMany(
    filter: { vendorId?: string | undefined; source?: string | undefined; firstAskedBefore?: number | undefined },
    by: Operator,
  ): Promise<number>;
}
