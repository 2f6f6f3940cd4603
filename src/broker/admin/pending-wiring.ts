/**
 * The admin API's pending queue wired to code-less enrollment (pending-operator.ts): the same list, accept,
 * reject and bulk reject `broker pending | accept | reject` run, their errors told as the admin API's. A page
 * is the store's keyset page (vendorId and q over its index); a source block is tested here, over pages read on
 * from there until the page is full or the queue read through (at most pendingMax keys wait per vendor).
 */
import type { Clock } from '../../clock.js';
import { type Operator, OperatorInputError } from '../operator.js';
import { acceptPending, PendingActionError, rejectPending, sourceTest } from '../pending-operator.js';
import type { Register } from '../registrar.js';
import type { BrokerStore } from '../store/types.js';
import { AdminError, type AdminErrorCode } from './errors.js';
import type { PendingAfter, PendingBook, PendingFilter, PendingItem } from './pending-book.js';

const BY_STATUS: Record<PendingActionError['status'], AdminErrorCode> = {
  404: 'not-found',
  409: 'conflict',
  502: 'cloud-refused',
  503: 'unavailable',
};

/** The operator functions' errors as the API's: a verdict by its status, bad input as 400. */
async function told<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof PendingActionError) throw new AdminError(BY_STATUS[err.status], err.message);
    if (err instanceof OperatorInputError) throw new AdminError('bad-request', err.message);
    throw err;
  }
}

/** Rows read at once while a source block is tested: a rare block reads on through the queue in these steps. */
const SOURCE_STEP = 500;

export function pendingBook(store: BrokerStore, register: Register, clock: Clock): PendingBook {
  return {
    async listPending(filter: PendingFilter, after: PendingAfter | null, limit: number): Promise<PendingItem[]> {
      const { vendorId, q } = filter;
      if (filter.source === undefined) return store.admin.pagePending({ vendorId, q }, after, limit);
      const source = filter.source;
      const inBlock = await told(async () => sourceTest(source));
      const page: PendingItem[] = [];
      for (let from = after; ; ) {
        const rows = await store.admin.pagePending({ vendorId, q }, from, SOURCE_STEP);
        for (const row of rows) {
          if (inBlock(row.source)) page.push(row);
          if (page.length === limit) return page;
        }
        const last = rows.at(-1);
        if (rows.length < SOURCE_STEP || last === undefined) return page;
        from = last;
      }
    },
    accept: (keyId: string, deviceId: string, by: Operator) =>
      told(() => acceptPending({ store, register, now: () => clock.wallNow() }, keyId, deviceId, by)),
    async reject(keyId: string, by: Operator) {
      try {
        return (await told(() => rejectPending(store, { keyId }, clock.wallNow(), by))) > 0;
      } catch (err) {
        if (err instanceof AdminError && err.code === 'not-found') return false;
        throw err;
      }
    },
    rejectMany: (filter, by) =>
      told(() =>
        rejectPending(
          store,
          {
            ...(filter.vendorId !== undefined && { vendorId: filter.vendorId }),
            ...(filter.source !== undefined && { source: filter.source }),
            ...(filter.firstAskedBefore !== undefined && { firstAskedBefore: filter.firstAskedBefore }),
          },
          clock.wallNow(),
          by,
        ),
      ),
  };
}
