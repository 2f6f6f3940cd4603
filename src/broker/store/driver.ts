import type { Body } from './sql.js';
import type { StoreKind } from './types.js';

/**
 * What sets the two databases apart, and nothing else: how a rule (sql.ts) is carried out — placeholders and row locks,
 * the store's clock, locks, unique-index errors, a gated chain — and how the bot lock is held.
 */
export interface Driver {
  readonly kind: StoreKind;
  /** Statements that each stand alone: reads, and writes that are safe one by one (no transaction of their own). */
  run<T>(body: Body<T>, mode: 'read' | 'write'): Promise<T>;
  /** Writes that stand or fall together and decide nothing: one transaction, unsynced on SQLite (a power cut may lose it whole). */
  batch<T>(body: Body<T>): Promise<T>;
  /** A decision: one transaction that must outlive a power cut, rolled back whole unless `keep` accepts its outcome. */
  decide<T>(body: Body<T>, keep: (value: T) => boolean): Promise<T>;
  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
