/** The audit's part of the broker's store (types.ts): its rows, written in batches, and their prune. */

/** One audit event as the store keeps it (DESIGN §3.7): never a token, a code, a key or a cookie. */
export interface AuditRow {
  at: number;
  action: string;
  /** `cli:<OS user>` for an operator's command, `device` for a device's own request. */
  actor: string;
  vendorId: string | null;
  deviceId: string | null;
  botId: string | null;
  keyId: string | null;
  codeId: string | null;
  source: string | null;
  outcome: string;
  /** How many events the row stands for: a refusal's row counts every refusal of its key and code in its minute. */
  count: number;
  /** A refusal's aggregation key (its keyId, code and minute); null for every other event. */
  fold: string | null;
}

/** One batch of a prune: rows older than `before` (of `action` alone, when not null) from `from` on, oldest first, at most `limit`. */
export interface AuditPrune {
  action: string | null;
  from: number;
  before: number;
  limit: number;
}

/** The audit's rows: written in batches, pruned by age. */
export interface AuditLog {
  /**
   * Writes the rows in one transaction; a row with a fold adds its count to the row any replica wrote for
   * that fold, so two replicas folding one refusal leave one row with the sum. Folds are unique within `rows`.
   */
  writeAudit(rows: readonly AuditRow[]): Promise<void>;
  /** Deletes one batch: how many rows, and the latest `at` among them (where the next batch starts). */
  pruneAudit(p: AuditPrune): Promise<{ deleted: number; reached: number }>;
}
