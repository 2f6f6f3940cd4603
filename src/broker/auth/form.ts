/** §3.7's first check, the form: the signature header and a JSON object body, and the fields routes read from it. */
import { type DeviceAuthorization, parseDeviceAuthorization } from '../../protocol/device-sig.js';
import { IDENTITY_FIELDS, type IdentityField, isIdentity } from '../../protocol/broker.js';
import { messageOf } from '../../protocol/errors.js';
import { Refusal } from '../refusal.js';

export interface SignedForm {
  auth: DeviceAuthorization;
  body: Record<string, unknown>;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Header and body as the form requires; a Refusal 'bad-request' naming what is wrong otherwise. */
export function readForm(authorization: string | undefined, raw: Buffer): SignedForm {
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
  return { auth, body: body as Record<string, unknown> };
}

/** An identity field of §3.7's form (IDENTITY_FIELDS) when present; 'bad-request' naming the field and its form otherwise. */
export function optionalIdentity(body: Record<string, unknown>, field: string, form: IdentityField): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (!isIdentity(form, value)) throw new Refusal('bad-request', `${field} must be ${IDENTITY_FIELDS[form].says}`);
  return value;
}

export function requiredIdentity(body: Record<string, unknown>, field: string, form: IdentityField): string {
  const value = optionalIdentity(body, field, form);
  if (value === undefined) throw new Refusal('bad-request', `${field} is required`);
  return value;
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

function hasUnprintable(value: string): boolean {
  return UNPRINTABLE.test(value);
}
