/**
 * The admin API's pending queue wired to code-less enrollment (pending-operator.ts): the same list, accept,
 * reject and bulk reject `broker pending | accept | reject` run, their errors told as the admin API's.
 * A vendor holds at most pendingMax keys that wait, so a page is cut from the filtered list in memory.
 */
import type { Clock } from '../../clock.js';
import { type Operator, OperatorInputError } from '../operator.js';
import { acceptPending, listPending, PendingActionError, rejectPending } from '../pending-operator.js';
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

/** Rows in the page order (vendorId, deviceId, keyId), byte-wise as the other pages. */
function before(a: PendingAfter, b: PendingAfter): boolean {
  if (a.vendorId !== b.vendorId) return a.vendorId < b.vendorId;
  if (a.deviceId !== b.deviceId) return a.deviceId < b.deviceId;
  return a.keyId < b.keyId;
}

export function pendingBook(store: BrokerStore, register: Register, clock: Clock): PendingBook {
  return {
    async listPending(filter: PendingFilter, after: PendingAfter | null, limit: number): Promise<PendingItem[]> {
      const all = await told(() =>
        listPending(store, {
          ...(filter.vendorId !== undefined && { vendorId: filter.vendorId }),
          ...(filter.source !== undefined && { source: filter.source }),
        }),
      );
      return all
        .filter((p) => filter.q === undefined || p.deviceId.startsWith(filter.q))
        .sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0))
        .filter((p) => after === null || before(after, p))
        .slice(0, limit);
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
