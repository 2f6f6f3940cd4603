import { createHmac } from 'node:crypto';

export const SIGNATURE_VERSION = 'V2';

/** The four parameters the V2 signature covers; accessSign, botId and vendorId are not signed. */
export interface SignedParams {
  accessKeyId: string;
  accessNonce: string;
  accessTimestamp: string;
  accessVersion: string;
}

/** Steps 1–3 of the V2 signature: lower-cased names, sorted, `name=value` joined by `&`, unescaped. */
export function canonicalStringV2(params: SignedParams): string {
  return Object.entries(params)
    .map(([name, value]) => [name.toLowerCase(), value] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

/** Steps 4–5: lower-case hex HMAC-MD5 of the canonical string, keyed by the SecretKey (both UTF-8). */
export function signV2(params: SignedParams, secretKey: string): string {
  // A string key is the same UTF-8 bytes, without a Buffer to allocate and wrap per signature.
  return createHmac('md5', secretKey)
    .update(Buffer.from(canonicalStringV2(params), 'utf8'))
    .digest('hex');
}
