/**
 * The admin API's cursors (DESIGN §3.8): opaque to the client, MACed under a key derived from tokenKeyFile (any
 * replica reads any replica's), and bound to the route and filters they were made for — used with others, 400.
 */
import { timingSafeEqual } from 'node:crypto';
import type { BrokerKeys } from '../keys.js';
import { badRequest } from './errors.js';

export type CursorKey = readonly (string | number)[];

/** The route and its filters as one text: what a cursor is bound to. */
function bindingOf(route: string, filters: Readonly<Record<string, string | undefined>>): string {
  const present = Object.entries(filters)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify([route, present]);
}

export class Cursors {
  readonly #keys: Pick<BrokerKeys, 'cursorMac'>;

  constructor(keys: Pick<BrokerKeys, 'cursorMac'>) {
    this.#keys = keys;
  }

  make(route: string, filters: Readonly<Record<string, string | undefined>>, key: CursorKey): string {
    const payload = Buffer.from(JSON.stringify(key)).toString('base64url');
    return `${payload}.${this.#keys.cursorMac(`${bindingOf(route, filters)}\n${payload}`)}`;
  }

  /** The key a cursor carries; one the broker did not make for these filters is 400. */
  read(route: string, filters: Readonly<Record<string, string | undefined>>, cursor: string): CursorKey {
    const [payload = '', mac = '', extra] = cursor.split('.');
    const expected = Buffer.from(this.#keys.cursorMac(`${bindingOf(route, filters)}\n${payload}`));
    const given = Buffer.from(mac);
    if (extra !== undefined || given.length !== expected.length || !timingSafeEqual(given, expected))
      throw badRequest('the cursor was not made for this list with these filters');
    const key: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (!Array.isArray(key) || !key.every((k) => typeof k === 'string' || typeof k === 'number')) throw badRequest('a malformed cursor');
    return key;
  }

  /**
   * One keyset page: the rows after the cursor's key (no cursor: from the start), and the cursor of the page
   * after them, null when this page is not full.
   */
  async page<R>(
    route: string,
    filters: Readonly<Record<string, string | undefined>>,
    at: { cursor: string | undefined; limit: number },
    fetch: (after: CursorKey | null, limit: number) => Promise<R[]>,
    keyOf: (row: R) => CursorKey,
  ): Promise<{ rows: R[]; next: string | null }> {
    const after = at.cursor === undefined ? null : this.read(route, filters, at.cursor);
    const rows = await fetch(after, at.limit);
    const last = rows.length === at.limit ? rows.at(-1) : undefined;
    return { rows, next: last === undefined ? null : this.make(route, filters, keyOf(last)) };
  }
}
