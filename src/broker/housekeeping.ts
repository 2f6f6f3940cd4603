/**
 * The broker's housekeeping, on the injected clock: each minute the sweep of expired nonces and rate
 * windows, the displacements that fell due (displacements.ts) and the pending keys past their 7 days; each day (the first a minute after start) the audit's prune (DESIGN §3.7). Every replica runs
 * both; two at once do no harm.
 */
import type { Logger } from 'pino';
import type { Cancel, Clock } from '../clock.js';
import { messageOf } from '../protocol/errors.js';
import { pruneAudit } from './audit/retention.js';
import type { BrokerStore } from './store/types.js';

const SWEEP_MS = 60_000;
/** Rate windows are at most an hour long: older ones count for nothing. */
const KEEP_WINDOWS_MS = 2 * 3_600_000;
const PRUNE_MS = 86_400_000;

export interface HousekeepingDeps {
  store: Pick<BrokerStore, 'sweep' | 'pruneAudit'>;
  clock: Pick<Clock, 'wallNow' | 'setTimer'>;
  log: Logger;
  auditRetentionDays: number;
  /** The displacements revoke --displace left due: run each minute (it never rejects). */
  displacements: { run(): Promise<void> };
  /** Drops (and audits) the keys that waited 7 days for an operator: run each minute. */
  pending: { drop(): Promise<unknown> };
}

/** Starts both; the function it returns stops them. */
export function startHousekeeping({ store, clock, log, auditRetentionDays, displacements, pending }: HousekeepingDeps): Cancel {
  const timers: Record<'sweep' | 'prune', Cancel> = { sweep: () => undefined, prune: () => undefined };
  const sweep = (): void => {
    store.sweep(clock.wallNow() - KEEP_WINDOWS_MS).catch((err: unknown) => log.warn({ err: messageOf(err) }, 'sweeping old nonces failed'));
    void displacements.run();
    pending.drop().catch((err: unknown) => log.warn({ err: messageOf(err) }, 'dropping keys that waited 7 days failed'));
    timers.sweep = clock.setTimer(SWEEP_MS, sweep);
  };
  const prune = (): void => {
    pruneAudit(store, auditRetentionDays, clock.wallNow()).then(
      (deleted) => log.info({ deleted }, 'audit rows past their retention pruned'),
      (err: unknown) => log.warn({ err: messageOf(err) }, 'pruning the audit failed; it is tried again tomorrow'),
    );
    timers.prune = clock.setTimer(PRUNE_MS, prune);
  };
  timers.sweep = clock.setTimer(SWEEP_MS, sweep);
  timers.prune = clock.setTimer(SWEEP_MS, prune);
  return () => {
    timers.sweep();
    timers.prune();
  };
}
