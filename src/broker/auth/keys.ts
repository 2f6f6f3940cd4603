/** §3.7's key and signature checks: which key a request names, and whether it signed the request. */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { type DeviceAuthorization, verifyRequest } from '../../protocol/device-sig.js';
import { Refusal } from '../refusal.js';
import type { KeyRow } from '../store/types.js';

/** The DER header of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the 32 raw bytes of the key follow it. */
const SPKI_HEADER = Buffer.from('302a300506032b6570032100', 'hex');

/** What a signature covers (DESIGN §3.7): the method, the path, the header's fields and the body's exact bytes. */
export interface SignedBytes {
  method: string;
  path: string;
  auth: DeviceAuthorization;
  raw: Buffer;
}

export function signatureMatches(key: KeyObject, req: SignedBytes): boolean {
  return verifyRequest(key, req.auth, req.method, req.path, req.raw);
}

export function verifySignature(key: KeyObject, req: SignedBytes): void {
  if (!signatureMatches(key, req)) throw badSignature();
}

export function badSignature(): Refusal {
  return new Refusal('bad-signature', 'the signature does not match the request');
}

export function revokedKey(): Refusal {
  return new Refusal('revoked', 'this key was revoked, replaced or rotated away');
}

/** A tombstone's refusal: its own final state. */
export function retiredKey(state: 'revoked' | 'rejected'): Refusal {
  return state === 'rejected' ? new Refusal('rejected', "an operator rejected this key's enrollment; it is final") : revokedKey();
}

/** The refusals of the key step for an enrolled key: no such key, or a key no longer active. */
export function refuseInactive(row: KeyRow | undefined): asserts row is KeyRow {
  if (row === undefined) throw new Refusal('unknown-key', 'no device is enrolled with this key');
  if (row.state !== 'active') throw revokedKey();
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
