/**
 * A keyset page over (vendorId, deviceId, keyId), written once for the devices and the pending pages
 * (admin-statements.ts): each source of lines a side, cut at the limit in the page's order from the line the page
 * starts after, over its own index, then the sides merged and cut again. Without q the order is (vendor_id,
 * device_id, key_id); with q — a literal prefix, never a pattern — it is (deviceId, vendorId, keyId) in byte order,
 * each side a range scan of the prefix, so a rare prefix among a million keys reads only its matches.
 */
import { PLANNED_EACH_CALL } from './sql.js';

/** A statement and its values, built for the filters a request has: each combination planned with its own index. */
export interface Query {
  sql: string;
  params: unknown[];
}

/** Collects a query's values, each placeholder numbered as it is added. */
export class Params {
  readonly values: unknown[] = [];

  add(value: unknown, type: 'TEXT' | 'BIGINT' = 'TEXT'): string {
    this.values.push(value);
    return `CAST($${this.values.length} AS ${type})`;
  }
}

/** The byte-order collation, named as each database names it: a prefix's range is exact only under it. */
export type BinaryCollation = 'BINARY' | '"C"';

/** Past every string that begins with q, in byte order (deviceIds and botIds never hold U+10FFFF). */
const PAST_PREFIX = '\u{10FFFF}';

/** Where a page starts: after this line. */
export interface LineKey {
  vendorId: string;
  deviceId: string;
  keyId: string;
}

export interface KeysetRequest {
  vendorId?: string | undefined;
  q?: string | undefined;
  after: LineKey | null;
  limit: number;
}

export class KeysetPage {
  readonly params = new Params();
  /** deviceId in byte order: the column a prefix is a range of. */
  readonly device: string;
  readonly #binary: BinaryCollation;
  readonly #limit: string;
  readonly #vendor: string | undefined;
  /** The prefix, and the placeholder past it. */
  readonly #q: { text: string; past: string } | undefined;
  /** The prefix's placeholder, made at its first use: a value no statement uses leaves PostgreSQL unable to type it. */
  #qLow: string | undefined;
  /** The deviceId range's lower bound: past the page's start when that is the tighter (a database bounds its scan by one). */
  readonly #from: string | undefined;
  readonly #order: readonly string[];
  readonly #segments: readonly (readonly string[])[];

  constructor(page: KeysetRequest, binary: BinaryCollation) {
    const p = this.params;
    this.#binary = binary;
    this.device = `device_id COLLATE ${binary}`;
    this.#limit = p.add(page.limit, 'BIGINT');
    this.#vendor = page.vendorId === undefined ? undefined : p.add(page.vendorId);
    const q = page.q === undefined ? undefined : { text: page.q, past: p.add(`${page.q}${PAST_PREFIX}`) };
    this.#q = q;
    const after = page.after && {
      vendorId: p.add(page.after.vendorId),
      deviceId: p.add(page.after.deviceId),
      keyId: p.add(page.after.keyId),
    };
    this.#from = q && page.after && page.after.deviceId > q.text ? after?.deviceId : undefined;
    this.#order = q ? [this.device, 'vendor_id', 'key_id'] : ['vendor_id', 'device_id', 'key_id'];
    const past = (values: string[]): string => `(${this.#order.join(', ')}) > (${values.join(', ')})`;
    // Where a page starts, as conditions each database seeks by: without q, a row comparison seeks by its first column
    // alone on SQLite, so the rest of the start's vendor and the vendors after it are two segments.
    this.#segments = !after
      ? [[]]
      : q
        ? [[past([after.deviceId, after.vendorId, after.keyId])]]
        : [
            [`vendor_id = ${after.vendorId}`, `device_id >= ${after.deviceId}`, past([after.vendorId, after.deviceId, after.keyId])],
            // With vendorId filtered there is no vendor after the start's (SQLite would walk the vendor to learn it).
            ...(this.#vendor === undefined ? [[`vendor_id > ${after.vendorId}`]] : []),
          ];
  }

  get hasPrefix(): boolean {
    return this.#q !== undefined;
  }

  /** The prefix's range over deviceId, from the page's start when that is the tighter; '' without q. */
  deviceInPrefix(): string {
    return this.inPrefix(this.device, this.#from);
  }

  /** The prefix's range over `column` (in byte order) from `lower` (the prefix itself unless given); '' without q. */
  inPrefix(column: string, lower?: string): string {
    if (!this.#q) return '';
    if (lower === undefined && this.#qLow === undefined) this.#qLow = this.params.add(this.#q.text);
    const from = lower ?? this.#qLow;
    return `${column} >= ${from} AND ${column} < ${this.#q.past}`;
  }

  /** `column` in byte order. */
  binary(column: string): string {
    return `${column} COLLATE ${this.#binary}`;
  }

  /** A side: its lines holding `conditions`, one statement per segment of the start, each in the page's order and cut at the limit. */
  side(select: string, conditions: readonly (string | false | undefined)[]): string[] {
    return this.#segments.map((segment) => {
      const all = [...conditions, this.#vendor !== undefined && `vendor_id = ${this.#vendor}`, ...segment].filter(
        (c): c is string => typeof c === 'string' && c !== '',
      );
      return `${select}${all.length === 0 ? '' : ` WHERE ${all.join(' AND ')}`} ORDER BY ${this.#order.join(', ')} LIMIT ${this.#limit}`;
    });
  }

  /** The sides merged in the page's order and cut at the limit; planned for its values at each call. */
  merged(parts: readonly string[]): Query {
    const outer = this.#q ? `"deviceId" COLLATE ${this.#binary}, "vendorId", "keyId"` : '"vendorId", "deviceId", "keyId"';
    const sql =
      `${PLANNED_EACH_CALL}SELECT * FROM (${parts.map((part, i) => `SELECT * FROM (${part}) AS part${i}`).join(' UNION ALL ')}) AS page ` +
      `ORDER BY ${outer} LIMIT ${this.#limit}`;
    return { sql, params: this.params.values };
  }
}
