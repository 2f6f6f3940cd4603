/** The rows the store reads of a key, as the rules hand them on: numbers as numbers, each state's own fields. */
import type { KeyRow, KnownKey, PendingRow } from '../types.js';

/** A FIND_KEY row as the key it says. */
export function knownKey(keyId: string, row: Record<string, unknown> | undefined): KnownKey | undefined {
  if (row === undefined) return undefined;
  if (row['state'] === 'pending') return { ...pendingRow(row as unknown as PendingRow), state: 'pending' };
  const { entombedAt, appId, type, name, source, firstAsked, lastAsked, ...key } = row;
  if (entombedAt == null) return key as unknown as KeyRow;
  return { keyId, publicKey: String(row['publicKey']), state: row['state'] as 'revoked' | 'rejected', entombedAt: Number(entombedAt) };
}

/** A row as the driver read it: times as numbers (PostgreSQL's BIGINT arrives as text). */
export function pendingRow(r: PendingRow): PendingRow {
  return {
    keyId: r.keyId,
    publicKey: r.publicKey,
    vendorId: r.vendorId,
    deviceId: r.deviceId,
    appId: r.appId,
    type: r.type,
    name: r.name,
    source: r.source,
    firstAsked: Number(r.firstAsked),
    lastAsked: Number(r.lastAsked),
  };
}
