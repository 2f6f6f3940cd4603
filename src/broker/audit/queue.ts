/**
 * The audit rows waiting for the store (DESIGN §3.7), bounded: past `max` a new row is dropped and counted
 * (its log line was written already). A refusal's row folds into the row of its key, code and minute while
 * that row waits, so a flood of one key costs one row, never one per request.
 */
import type { AuditRow } from '../store/types.js';

export const MINUTE_MS = 60_000;

/** The minute `at` falls in, as its first ms. */
export function minuteOf(at: number): number {
  return Math.floor(at / MINUTE_MS) * MINUTE_MS;
}

/**
 * A signed refusal's aggregation key: one row per keyId, code and minute, across replicas. The minute comes
 * first, so the unique index grows at its end as time goes, not at a random place per key.
 */
export function foldOf(keyId: string, code: string, at: number): string {
  return `${minuteOf(at)}/${keyId}/${code}`;
}

export class AuditQueue {
  readonly #max: number;
  #rows: AuditRow[] = [];
  /** The waiting rows that have a fold, by it. */
  readonly #folds = new Map<string, AuditRow>();
  #dropped = 0;

  constructor(max: number) {
    this.#max = max;
  }

  /** Queues `row`, or adds its count to the waiting row of its fold; false when the queue is full and it was dropped. */
  push(row: AuditRow): boolean {
    const waiting = row.fold === null ? undefined : this.#folds.get(row.fold);
    if (waiting) {
      waiting.count += row.count;
      return true;
    }
    if (this.#rows.length >= this.#max) {
      this.#dropped += 1;
      return false;
    }
    this.#rows.push(row);
    if (row.fold !== null) this.#folds.set(row.fold, row);
    return true;
  }

  /** The oldest `n` rows, out of the queue. */
  take(n: number): AuditRow[] {
    const taken = this.#rows.splice(0, n);
    for (const row of taken) if (row.fold !== null) this.#folds.delete(row.fold);
    return taken;
  }

  /**
   * A batch the store did not take, back at the front to be tried again: a fold queued again meanwhile is
   * merged into it (one row per fold in a batch), and what passes `max` is dropped, newest first.
   */
  putBack(batch: readonly AuditRow[]): void {
    for (const row of batch) {
      const since = row.fold === null ? undefined : this.#folds.get(row.fold);
      if (since) {
        row.count += since.count;
        this.#rows.splice(this.#rows.indexOf(since), 1);
      }
      if (row.fold !== null) this.#folds.set(row.fold, row);
    }
    this.#rows = [...batch, ...this.#rows];
    for (const row of this.#rows.splice(this.#max)) {
      if (row.fold !== null) this.#folds.delete(row.fold);
      this.#dropped += 1;
    }
  }

  get size(): number {
    return this.#rows.length;
  }

  /** Rows dropped because the queue was full, since it was made. */
  get dropped(): number {
    return this.#dropped;
  }
}
