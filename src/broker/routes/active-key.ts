import { createPublicKey, type KeyObject } from 'node:crypto';
import type { BrokerContext } from '../context.js';
import { Refusal } from '../refusal.js';
import type { KeyRow } from '../store/types.js';

/** The DER header of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the 32 raw bytes of the key follow it. */
const SPKI_HEADER = Buffer.from('302a300506032b6570032100', 'hex');

/** The key a request names, read from the store, so a revocation holds at once: unknown and revoked keys are refused. */
export async function activeKey(ctx: Pick<BrokerContext, 'store'>, keyId: string): Promise<{ row: KeyRow; key: KeyObject }> {
  const row = await ctx.store.findKey(keyId);
  refuseInactive(row);
  return { row, key: storedKey(row.publicKey) };
}

/** The refusals of §3.7's key step: no such key, or a key no longer active. */
export function refuseInactive(row: KeyRow | undefined): asserts row is KeyRow {
  if (row === undefined) throw new Refusal('unknown-key', 'no device is enrolled with this key');
  if (row.state !== 'active') throw new Refusal('revoked', 'this key was revoked, replaced or rotated away');
}

/**
 * A stored key as a key to verify with. It was checked once, by publicKeyFromWire, before it was stored;
 * here it is only imported, and from PEM text: Node takes a DER object through KeyObject brand checks that
 * throw and catch, several times the cost of this whole import, on every request.
 */
export function storedKey(publicKey: string): KeyObject {
  const der = Buffer.concat([SPKI_HEADER, Buffer.from(publicKey, 'base64url')]);
  return createPublicKey(`-----BEGIN PUBLIC KEY-----\n${der.toString('base64')}\n-----END PUBLIC KEY-----\n`);
}
