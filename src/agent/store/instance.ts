import { acquireLock, probeLock, type HeldLock } from './lock.js';
import type { TokenStore } from './token-store.js';

/** Claiming a stateDir for this daemon: held, refused (another daemon runs), or unusable (squatted by a stranger). */
export type InstanceClaim =
  | { ok: true; lock: HeldLock }
  /** Another local user bound the lock's name: the daemon runs anyway, without the one-daemon guarantee. */
  | { ok: true; unusable: string }
  | { ok: false; holder: { pid: number } };

/** Makes this process the one daemon of the store's stateDir unless another daemon (one that knows the store's key) is. */
export async function claimInstance(store: TokenStore): Promise<InstanceClaim> {
  const claim = await acquireLock(store.requireLockKey(), 'instance');
  if (claim.ok) return claim;
  if (claim.probe.state === 'held') return { ok: false, holder: { pid: claim.probe.pid } };
  return { ok: true, unusable: claim.probe.detail };
}

/** The daemon running on this stateDir, if any: a live holder of its instance lock (a killed daemon holds nothing). */
export async function runningDaemon(store: TokenStore): Promise<{ pid: number } | undefined> {
  if (store.lockKey === undefined) return undefined;
  const probe = await probeLock(store.lockKey, 'instance');
  return probe.state === 'held' ? { pid: probe.pid } : undefined;
}
