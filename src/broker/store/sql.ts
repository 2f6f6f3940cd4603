/**
 * How the broker's store rules are written once for both databases: each rule is a generator that
 * yields what it needs of the database (a statement, a lock, the store's time) and receives the answer,
 * and a driver (sqlite.ts, postgres.ts) carries out each yield in its own way. Statements use PostgreSQL's
 * numbered placeholders (`$1`) and its row locks (`FOR SHARE`); SQLite's driver rewrites them once per statement.
 */
import type { GatedChain } from './chain.js';

export type Row = Record<string, unknown>;

export type Op =
  | { readonly kind: 'get' | 'all' | 'run'; readonly sql: string; readonly params: readonly unknown[] }
  | { readonly kind: 'lock'; readonly names: readonly string[] }
  | { readonly kind: 'now' }
  | { readonly kind: 'chain'; readonly chain: GatedChain; readonly params: readonly unknown[] };

/** A rule: it yields ops and returns its outcome. A failed op is thrown into it at its yield. */
export type Body<T> = Generator<Op, T, unknown>;

/** The first row a statement returns, if any. */
export function* get<R = Row>(sql: string, ...params: unknown[]): Generator<Op, R | undefined, unknown> {
  return (yield { kind: 'get', sql, params }) as R | undefined;
}

export function* all<R = Row>(sql: string, ...params: unknown[]): Generator<Op, R[], unknown> {
  return (yield { kind: 'all', sql, params }) as R[];
}

/** Runs a statement; the number of rows it changed. */
export function* run(sql: string, ...params: unknown[]): Generator<Op, number, unknown> {
  return (yield { kind: 'run', sql, params }) as number;
}

/**
 * Holds each name, in the order given, until the transaction ends, so that transactions naming it run one after
 * another across replicas (PostgreSQL: advisory locks, taken in one round trip; SQLite: its one writer already
 * serialises every transaction).
 */
export function* lock(...names: string[]): Generator<Op, void, unknown> {
  yield { kind: 'lock', names };
}

/** The store's own clock in ms: replicas whose clocks differ agree on what it says. */
export function* storeNow(): Generator<Op, number, unknown> {
  return (yield { kind: 'now' }) as number;
}

/** Runs a gated chain (chain.ts) in one step: what its read found before the chain wrote, and each step's output. */
export function* chain(c: GatedChain, ...params: unknown[]): Generator<Op, ChainResult, unknown> {
  return (yield { kind: 'chain', chain: c, params }) as ChainResult;
}

export interface ChainResult {
  /** The chain's read, as it was before any of its steps wrote. */
  read: Row | undefined;
  /** `step.column` → the value that step returned (null when it returned no row). */
  out: Readonly<Record<string, unknown>>;
}

/**
 * A statement that begins with this is planned for its values at every call (PostgreSQL: sent unnamed, never
 * prepared): a generic plan cannot tell which of a page's bounds is the tighter and walked half an index.
 */
export const PLANNED_EACH_CALL = '/* planned each call */ ';

/** A statement broke a unique index; `index` names it as the schema does (`keys_pkey`), on either database. */
export class UniqueViolation extends Error {
  readonly index: string;

  constructor(index: string, options?: ErrorOptions) {
    super(`unique index ${index} violated`, options);
    this.name = 'UniqueViolation';
    this.index = index;
  }
}

/** The index a keyId is unique by: a keyId enrolled twice is this violation. */
export const KEY_ID_INDEX = 'keys_pkey';
