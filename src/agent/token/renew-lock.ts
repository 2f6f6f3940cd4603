import type { Logger } from 'pino';
import { acquireLock } from '../store/lock.js';
import type { TokenStore } from '../store/token-store.js';
import type { Clock } from '../../clock.js';

export interface RenewLockDeps {
  store: TokenStore;
  clock: Pick<Clock, 'sleep'>;
  log: Logger;
  /** Ends the wait for the lock: `work` is then not run. */
  stopped: () => boolean;
}

/** While another botlink process holds the lock it answers a probe at once; its renewal takes a round trip. */
const LOCK_POLL_MS = 250;

/**
 * Runs `work` holding the stateDir's renew lock, waited for while another botlink process renews, so
 * two processes never renew the same pair at once. When the lock's name cannot be used (squatted by a
 * process that cannot prove it knows the key) `work` runs without it: renewing matters more.
 */
export async function underRenewLock(deps: RenewLockDeps, work: () => Promise<void> | void): Promise<void> {
  for (;;) {
    const claim = await acquireLock(deps.store.requireLockKey(), 'renew');
    if (claim.ok) {
      try {
        if (!deps.stopped()) await work();
      } finally {
        await claim.lock.release();
      }
      return;
    }
    if (claim.probe.state === 'unusable') {
      deps.log.error({ code: 'ERR_LOCK_UNUSABLE' }, `renew lock unavailable (${claim.probe.detail}): renewing without it`);
      if (!deps.stopped()) await work();
      return;
    }
    if (deps.stopped()) return;
    await deps.clock.sleep(LOCK_POLL_MS);
  }
}
