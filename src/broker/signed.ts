/**
 * The checks every signed request passes, in DESIGN §3.7's order: form, time window, key (per route),
 * signature, then the nonce. Nothing is written before the nonce, and the nonce only once all else held.
 */
import type { KeyObject } from 'node:crypto';
import { type DeviceAuthorization, parseDeviceAuthorization, verifyRequest } from '../protocol/device-sig.js';
import { messageOf } from '../protocol/errors.js';
import { Refusal } from './refusal.js';
import type { BrokerStore } from './store/types.js';

export const WINDOW_MS = 300_000;
/** A nonce is kept this long past its ts: longer than the window, so a replay inside it is always seen. */
export const NONCE_KEEP_MS = 360_000;

export interface SignedInput {
  method: string;
  path: string;
  auth: DeviceAuthorization;
  raw: Buffer;
  body: Record<string, unknown>;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Header and body as the form requires; a Refusal 'bad-request' naming what is wrong otherwise. */
export function readSigned(method: string, path: string, authorization: string | undefined, raw: Buffer): SignedInput {
  let auth: DeviceAuthorization;
  try {
    auth = parseDeviceAuthorization(authorization);
  } catch (err) {
    throw new Refusal('bad-request', messageOf(err));
  }
  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(raw));
  } catch {
    throw new Refusal('bad-request', 'the body must be a JSON object in UTF-8');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Refusal('bad-request', 'the body must be a JSON object');
  return { method, path, auth, raw, body: body as Record<string, unknown> };
}

export function checkWindow(auth: DeviceAuthorization, now: number): void {
  if (Math.abs(auth.tsMs - now) > WINDOW_MS) {
    throw new Refusal('clock-skew', `ts is ${Math.round((auth.tsMs - now) / 1000)} s from the broker's time`, {
      extra: { serverTime: now },
    });
  }
}

export function verifySignature(key: KeyObject, input: SignedInput): void {
  if (!signatureMatches(key, input)) throw badSignature();
}

export function badSignature(): Refusal {
  return new Refusal('bad-signature', 'the signature does not match the request');
}

export function signatureMatches(key: KeyObject, input: SignedInput): boolean {
  return verifyRequest(key, input.auth, input.method, input.path, input.raw);
}

export function replayed(): Refusal {
  return new Refusal('replayed', 'this nonce was used before');
}

/** The signature, then the nonce — atomically, by the store, for every replica. */
export async function verifyThenSpendNonce(store: BrokerStore, key: KeyObject, input: SignedInput): Promise<void> {
  verifySignature(key, input);
  if (!(await store.useNonce(input.auth.keyId, input.auth.nonce, input.auth.tsMs + NONCE_KEEP_MS))) throw replayed();
}

/** Field readers: each refuses with 'bad-request' naming the field. */
export function optionalString(body: Record<string, unknown>, field: string, max = 128): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > max || hasUnprintable(value)) {
    throw new Refusal('bad-request', `${field} must be a string of 1 to ${max} printable characters`);
  }
  return value;
}

export function requiredString(body: Record<string, unknown>, field: string, max = 128): string {
  const value = optionalString(body, field, max);
  if (value === undefined) throw new Refusal('bad-request', `${field} is required`);
  return value;
}

/** Controls (C0, DEL, C1), format characters (bidi, zero-width) and lone surrogates: nothing a name needs, and what a terminal or a log would misread. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}]/u;

export function hasUnprintable(value: string): boolean {
  return UNPRINTABLE.test(value);
}
