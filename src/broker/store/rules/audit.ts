/** The audit's rules (AuditLog), written once for both databases (sql.ts). */
import { all, type Body, run } from '../sql.js';
import { auditInsert, PRUNE_AUDIT } from '../statements.js';
import type { AuditPrune, AuditRow } from '../types.js';

/** The most rows one INSERT carries. */
export const AUDIT_ROWS_PER_STATEMENT = 256;

/**
 * How a batch of `n` rows is cut into statements: as many of `max` as fit, then powers of two, largest first
 * — so each database prepares at most nine texts, however the batches fall.
 */
export function statementSizes(n: number, max = AUDIT_ROWS_PER_STATEMENT): number[] {
  const sizes: number[] = [];
  let left = n;
  for (; left >= max; left -= max) sizes.push(max);
  for (let size = max / 2; size >= 1; size /= 2) {
    if (left >= size) {
      sizes.push(size);
      left -= size;
    }
  }
  return sizes;
}

/**
 * The rows in the order they are written: events first, then folded refusals by fold, so two replicas
 * upserting the same folds take their row locks in one order and never deadlock.
 */
export function writeOrder(rows: readonly AuditRow[]): AuditRow[] {
  const events = rows.filter((r) => r.fold === null);
  const folded = rows.filter((r) => r.fold !== null).sort((a, b) => ((a.fold as string) < (b.fold as string) ? -1 : 1));
  return [...events, ...folded];
}

/** AuditLog.writeAudit: the driver runs it as one transaction, so a batch is written whole or not at all. */
export function* writeAuditTx(rows: readonly AuditRow[]): Body<void> {
  const ordered = writeOrder(rows);
  let at = 0;
  for (const size of statementSizes(ordered.length)) {
    const values = ordered
      .slice(at, at + size)
      .flatMap((r) => [r.at, r.action, r.actor, r.vendorId, r.deviceId, r.botId, r.keyId, r.codeId, r.source, r.outcome, r.count, r.fold]);
    at += size;
    yield* run(auditInsert(size), ...values);
  }
}

/** AuditLog.pruneAudit. */
export function* pruneAuditTx(p: AuditPrune): Body<{ deleted: number; reached: number }> {
  const rows = yield* all<{ at: number }>(PRUNE_AUDIT, p.action, p.from, p.before, p.limit);
  return { deleted: rows.length, reached: rows.reduce((latest, r) => Math.max(latest, Number(r.at)), p.from) };
}
