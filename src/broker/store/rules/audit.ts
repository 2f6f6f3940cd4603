/** The audit's rules (AuditLog), written once for both databases (sql.ts). */
import { all, type Body, run } from '../sql.js';
import { auditInsert, COUNT_AUDIT_MINUTE, COUNTED_ACTIONS, PRUNE_AUDIT } from '../statements.js';
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
  for (const [minute, action, outcome, n] of minuteCounts(rows)) yield* run(COUNT_AUDIT_MINUTE, minute, action, outcome, n);
}

/** The batch's tokens and refusals by (minute, action, outcome), in one order, so that replicas' batches never deadlock. */
export function minuteCounts(rows: readonly AuditRow[]): [number, string, string, number][] {
  const counts = new Map<string, [number, string, string, number]>();
  for (const r of rows) {
    if (!COUNTED_ACTIONS.includes(r.action)) continue;
    const minute = Math.floor(r.at / 60_000) * 60_000;
    const key = JSON.stringify([minute, r.action, r.outcome]);
    const held = counts.get(key);
    if (held) held[3] += r.count;
    else counts.set(key, [minute, r.action, r.outcome, r.count]);
  }
  return [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, v]) => v);
}

/** AuditLog.pruneAudit. */
export function* pruneAuditTx(p: AuditPrune): Body<{ deleted: number; reached: number }> {
  const rows = yield* all<{ at: number }>(PRUNE_AUDIT, p.action, p.from, p.before, p.limit);
  return { deleted: rows.length, reached: rows.reduce((latest, r) => Math.max(latest, Number(r.at)), p.from) };
}
