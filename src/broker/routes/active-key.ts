import type { KeyObject } from 'node:crypto';
import { publicKeyFromWire } from '../../protocol/device-sig.js';
import type { BrokerContext } from '../context.js';
import { Refusal } from '../refusal.js';
import type { KeyRow } from '../store/types.js';

/** The key a request names, read from the store on every request so a revocation holds at once. */
export async function activeKey(ctx: Pick<BrokerContext, 'store'>, keyId: string): Promise<{ row: KeyRow; key: KeyObject }> {
  const row = await ctx.store.findKey(keyId);
  if (!row) throw new Refusal('unknown-key', 'no device is enrolled with this key');
  if (row.state !== 'active') throw new Refusal('revoked', 'this key was revoked, replaced or rotated away');
  return { row, key: publicKeyFromWire(row.publicKey).key };
}
