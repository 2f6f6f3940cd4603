/**
 * The broker's device-request signature (DESIGN §3.7): Ed25519 over seven lines that bind the method,
 * the path, the key, the time, a nonce and the body's SHA-256. Pure: no I/O, no clock.
 */
import { createHash, createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import { WireError } from './errors.js';

export const DEVICE_AUTH_SCHEME = 'BOTLINK-ED25519';
const ROTATE_SCHEME = 'BOTLINK-ROTATE';

/** DER prefix of an Ed25519 SubjectPublicKeyInfo; the 32 raw bytes follow it. */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** DER prefix of an Ed25519 PKCS#8 private key; the 32-byte seed follows it. */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

const P = 2n ** 255n - 19n;
/** y of the eight points of small order (y and p − y of the order-8 points, 0, 1, p − 1). */
const SMALL_ORDER_Y: ReadonlySet<bigint> = new Set([
  0n,
  1n,
  P - 1n,
  yOf(Buffer.from('26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05', 'hex')),
  yOf(Buffer.from('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a', 'hex')),
]);

/** The y coordinate of an encoded point: little-endian, the top bit (x's sign) cleared. */
function yOf(raw: Buffer): bigint {
  const le = Buffer.from(raw);
  le[31] = (le[31] ?? 0) & 0x7f;
  return BigInt(`0x${le.reverse().toString('hex')}`);
}

export function base64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/** Strict base64url without padding: `Buffer.from` would skip what it cannot read. */
function fromBase64url(text: string, what: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new WireError('', `${what} is not base64url without padding`);
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.toString('base64url') !== text) throw new WireError('', `${what} is not canonical base64url`);
  return bytes;
}

/** keyId: lower-case hex of the first 16 bytes of SHA-256 over the 32 raw public-key bytes. */
export function keyIdOf(rawPublicKey: Uint8Array): string {
  return createHash('sha256').update(rawPublicKey).digest().subarray(0, 16).toString('hex');
}

/** The 32 raw bytes of an Ed25519 public key, or of a private key's public half. */
export function rawPublicKeyOf(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const der = pub.export({ type: 'spki', format: 'der' });
  return der.subarray(SPKI_PREFIX.length);
}

/**
 * A `publicKey` from the wire as a key to verify with; refuses what is not 32 bytes, a non-canonical
 * y (≥ p) and the small-order points, which would let one signature pass for many messages.
 */
export function publicKeyFromWire(text: string): { key: KeyObject; raw: Buffer; keyId: string } {
  const raw = fromBase64url(text, 'publicKey');
  if (raw.length !== 32) throw new WireError('', `publicKey must be 32 bytes, got ${raw.length}`);
  const y = yOf(raw);
  if (y >= P) throw new WireError('', 'publicKey is not canonically encoded');
  if (SMALL_ORDER_Y.has(y)) throw new WireError('', 'publicKey is a point of small order');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
  } catch {
    throw new WireError('', 'publicKey is not a point on Ed25519');
  }
  return { key, raw, keyId: keyIdOf(raw) };
}

/** An Ed25519 private key from its 32-byte seed (RFC 8032 test keys are given so). */
export function privateKeyFromSeed(seed: Uint8Array): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

export interface SignedRequestParts {
  method: string;
  path: string;
  keyId: string;
  ts: string;
  nonce: string;
  body: Uint8Array | string;
}

export function bodySha256(body: Uint8Array | string): string {
  return createHash('sha256').update(body).digest('hex');
}

/** The seven lines the signature covers, joined by `\n`, no trailing newline. */
export function requestMessage(req: SignedRequestParts): string {
  return [DEVICE_AUTH_SCHEME, req.method, req.path, req.keyId, req.ts, req.nonce, bodySha256(req.body)].join('\n');
}

export function signRequest(privateKey: KeyObject, req: SignedRequestParts): string {
  const sig = base64url(sign(null, Buffer.from(requestMessage(req), 'utf8'), privateKey));
  return `${DEVICE_AUTH_SCHEME} keyId=${req.keyId},ts=${req.ts},nonce=${req.nonce},sig=${sig}`;
}

export interface DeviceAuthorization {
  keyId: string;
  ts: string;
  /** ts as a number, for the window check. */
  tsMs: number;
  nonce: string;
  sig: Buffer;
}

const AUTH_FIELDS = /^keyId=([0-9a-f]{32}),ts=([0-9]{13}),nonce=([A-Za-z0-9_-]{16,64}),sig=([A-Za-z0-9_-]{86})$/;

/** Parses the Authorization header; anything but the exact form is a WireError (400 `bad-request`). */
export function parseDeviceAuthorization(header: string | undefined): DeviceAuthorization {
  if (header === undefined) throw new WireError('', 'missing Authorization header');
  const prefix = `${DEVICE_AUTH_SCHEME} `;
  if (!header.startsWith(prefix)) throw new WireError('', `Authorization must use the ${DEVICE_AUTH_SCHEME} scheme`);
  const m = AUTH_FIELDS.exec(header.slice(prefix.length));
  if (!m) throw new WireError('', 'Authorization must be keyId=<32 hex>,ts=<13 digits>,nonce=<16–64 of [A-Za-z0-9_-]>,sig=<base64url>');
  const [, keyId = '', ts = '', nonce = '', sig = ''] = m;
  const sigBytes = fromBase64url(sig, 'sig');
  if (sigBytes.length !== 64) throw new WireError('', 'sig must be 64 bytes');
  return { keyId, ts, tsMs: Number(ts), nonce, sig: sigBytes };
}

/** Whether `auth.sig` is the key's signature over this request. */
export function verifyRequest(publicKey: KeyObject, auth: DeviceAuthorization, method: string, path: string, body: Uint8Array): boolean {
  const message = requestMessage({ method, path, keyId: auth.keyId, ts: auth.ts, nonce: auth.nonce, body });
  return verify(null, Buffer.from(message, 'utf8'), publicKey, auth.sig);
}

/** What a new key signs to prove possession at rotation: the scheme, the current keyId and the request's ts. */
export function rotateProofMessage(currentKeyId: string, ts: string): string {
  return `${ROTATE_SCHEME}\n${currentKeyId}\n${ts}`;
}

export function signRotateProof(newKey: KeyObject, currentKeyId: string, ts: string): string {
  return base64url(sign(null, Buffer.from(rotateProofMessage(currentKeyId, ts), 'utf8'), newKey));
}

export function verifyRotateProof(newKey: KeyObject, proof: string, currentKeyId: string, ts: string): boolean {
  let sig: Buffer;
  try {
    sig = fromBase64url(proof, 'proof');
  } catch {
    return false;
  }
  return sig.length === 64 && verify(null, Buffer.from(rotateProofMessage(currentKeyId, ts), 'utf8'), newKey, sig);
}
