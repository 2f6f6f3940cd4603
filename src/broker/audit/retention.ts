/** How long the audit keeps its rows (DESIGN §3.7): `auditRetentionDays`, and token-issued events 30 days at most. */
import type { AuditLog, AuditPrune } from '../store/types.js';
import type { AuditAction } from './trail.js';

export const DEFAULT_AUDIT_RETENTION_DAYS = 400;
/** Token-issued events are most of the audit (one per token a device takes) and matter least once their token has ended. */
export const TOKEN_RETENTION_DAYS = 30;
/** Rows one prune statement deletes at most: no database holds one long transaction, nor SQLite's one thread for long. */
export const PRUNE_BATCH = 2_000;
const DAY_MS = 86_400_000;
const TOKEN: AuditAction = 'token';

/**
 * Deletes the rows past their retention at `now`, batch after batch, oldest first: every row older than
 * `retentionDays`, then token-issued ones older than their own. Replicas pruning at once each delete what
 * the other has not: no row is deleted twice, none past its retention is kept. How many this call deleted.
 */
export async function pruneAudit(store: Pick<AuditLog, 'pruneAudit'>, retentionDays: number, now: number): Promise<number> {
  const passes: Pick<AuditPrune, 'action' | 'before'>[] = [
    { action: null, before: now - retentionDays * DAY_MS },
    { action: TOKEN, before: now - Math.min(TOKEN_RETENTION_DAYS, retentionDays) * DAY_MS },
  ];
  let deleted = 0;
  for (const pass of passes) {
    for (let from = 0; ; ) {
      const batch = await store.pruneAudit({ ...pass, from, limit: PRUNE_BATCH });
      deleted += batch.deleted;
      // Only a batch that deletes nothing ends the pass: replicas racing may each delete part of one batch,
      // and one of those that deleted something always goes on while rows are left.
      if (batch.deleted === 0) break;
      from = batch.reached;
    }
  }
  return deleted;
}
