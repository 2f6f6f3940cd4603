import { createPrivateKey, generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, fsyncSync, linkSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { inspect } from 'node:util';
import { giveToFolderOwner, makeFolders } from '../../ownership.js';
import { base64url, keyIdOf, rawPublicKeyOf, type SignedRequestParts, signRequest } from '../../protocol/device-sig.js';
import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';
import { type PrivateFileRules, readPrivateFile } from '../../private-file.js';

/** A PKCS#8 PEM of an Ed25519 key is 119 bytes; anything far bigger is the wrong file. */
const MAX_KEY_BYTES = 4096;

/**
 * The device's Ed25519 key (DESIGN §3.7); printed or serialised it shows only its keyId.
 *
 * Given as checked PKCS#8 bytes, it becomes an OpenSSL key only when first used: a boot with a cached
 * token never asks the broker, and OpenSSL's first key import costs a fresh process 1–4 ms.
 */
export class DeviceKey {
  #key: KeyObject | undefined;
  /** RFC 8410 PKCS#8 of the key (checked by `ed25519Pkcs8`), until the first use imports it and wipes it. */
  #pkcs8: Buffer | undefined;
  #ids: { keyId: string; publicKey: string } | undefined;

  constructor(key: KeyObject | Buffer) {
    if (Buffer.isBuffer(key)) this.#pkcs8 = key;
    else this.#key = key;
  }

  /** Lower-case hex of the first 16 bytes of SHA-256 over the raw public key. */
  get keyId(): string {
    return this.#publicIds().keyId;
  }

  /** base64url (no padding) of the 32 raw public-key bytes, as /v1/enroll takes it. */
  get publicKey(): string {
    return this.#publicIds().publicKey;
  }

  /** The Authorization header of one request to the broker. */
  authorize(req: Omit<SignedRequestParts, 'keyId'>): string {
    return signRequest(this.#object(), { ...req, keyId: this.keyId });
  }

  toString(): string {
    return `DeviceKey(${this.keyId})`;
  }

  toJSON(): string {
    return this.toString();
  }

  [inspect.custom](): string {
    return this.toString();
  }

  #publicIds(): { keyId: string; publicKey: string } {
    if (this.#ids === undefined) {
      const raw = rawPublicKeyOf(this.#object());
      this.#ids = { keyId: keyIdOf(raw), publicKey: base64url(raw) };
    }
    return this.#ids;
  }

  #object(): KeyObject {
    if (this.#key === undefined) {
      const der = this.#pkcs8 as Buffer;
      this.#key = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
      der.fill(0);
      this.#pkcs8 = undefined;
    }
    return this.#key;
  }
}

/** The device key file is missing, unsafe or unusable; `fix` says what to do. */
export class DeviceKeyError extends BotlinkError {
  readonly path: string;

  constructor(path: string, message: string, options?: BotlinkErrorOptions) {
    super('ERR_DEVICE_KEY', message, 'needs-config', options);
    this.path = path;
  }
}

/** The command that makes the device key, enrolls it, and writes botId and brokerUrl to the config. */
export const ENROLL_COMMAND = 'botlink provision --broker URL --code CODE --device-id SN';

const KEY_RULES: PrivateFileRules = {
  noun: 'device key file',
  user: 'the agent user',
  credential: 'device-key',
  createHint: (path) =>
    `enroll this device with \`${ENROLL_COMMAND}\`, which makes the key at ${path}; a zero-touch board (brokerUrl and vendorId, no botId) makes it at the daemon's first start (\`systemctl start botlink\`), or now with \`botlink key\``,
  // Someone may have read it already: tightening the mode does not take it back.
  exposedFix: (path) =>
    `run \`chmod 600 ${path}\`; if anyone else could log in meanwhile, ask the vendor to revoke this device and enroll ` +
    `a new key (\`${ENROLL_COMMAND}\` with a new code)`,
  refuse: (path, message, options) => new DeviceKeyError(path, message, options),
};

/** Reads the device key: a private file (readPrivateFile) holding an Ed25519 key as PKCS#8 PEM. */
export function loadDeviceKey(path: string): DeviceKey {
  const bytes = readPrivateFile(path, KEY_RULES, MAX_KEY_BYTES);
  try {
    if (bytes.length > MAX_KEY_BYTES) throw notAKey(path, 'is too big for an Ed25519 key');
    // The shape every Ed25519 key written by botlink or OpenSSL has: checked here, imported at first use.
    const pkcs8 = ed25519Pkcs8(bytes);
    if (pkcs8 !== null) return new DeviceKey(pkcs8);
    let key: KeyObject;
    try {
      key = createPrivateKey({ key: bytes, format: 'pem' });
    } catch (err) {
      // OpenSSL's message names no key material, but says nothing a person can act on either.
      throw notAKey(path, 'holds no private key in PEM', err);
    }
    if (key.asymmetricKeyType !== 'ed25519') throw notAKey(path, `holds an ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519`);
    return new DeviceKey(key);
  } finally {
    bytes.fill(0);
  }
}

/** RFC 8410's PKCS#8 (version 1) of an Ed25519 key is these 16 bytes, then the 32-byte private key. */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const PEM_HEAD = Buffer.from('-----BEGIN PRIVATE KEY-----\n');
const PEM_TAIL = Buffer.from('\n-----END PRIVATE KEY-----\n');
/** 48 bytes of PKCS#8 are one line of 64 base64 characters, without padding. */
const PKCS8_B64_CHARS = 64;
const B64_VALUES = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) B64_VALUES[c.charCodeAt(0)] = i;

/**
 * The PKCS#8 bytes when `pem` is exactly one PRIVATE KEY block of an Ed25519 key in RFC 8410's
 * version-1 form (any 32 bytes are a valid Ed25519 private key, so this shape is the whole check);
 * otherwise null, and OpenSSL judges the file. Decoded without making a string of the key.
 */
export function ed25519Pkcs8(pem: Buffer): Buffer | null {
  if (pem.length !== PEM_HEAD.length + PKCS8_B64_CHARS + PEM_TAIL.length) return null;
  if (!pem.subarray(0, PEM_HEAD.length).equals(PEM_HEAD) || !pem.subarray(pem.length - PEM_TAIL.length).equals(PEM_TAIL)) return null;
  const der = Buffer.alloc((PKCS8_B64_CHARS / 4) * 3);
  for (let i = 0; i < PKCS8_B64_CHARS; i += 4) {
    let quad = 0;
    for (let j = 0; j < 4; j++) {
      const value = B64_VALUES[pem[PEM_HEAD.length + i + j] as number] ?? -1;
      if (value < 0) {
        der.fill(0);
        return null;
      }
      quad = (quad << 6) | value;
    }
    der.writeUIntBE(quad, (i / 4) * 3, 3);
  }
  if (!der.subarray(0, ED25519_PKCS8_PREFIX.length).equals(ED25519_PKCS8_PREFIX)) {
    der.fill(0);
    return null;
  }
  return der;
}

function notAKey(path: string, problem: string, cause?: unknown): DeviceKeyError {
  return new DeviceKeyError(path, `device key file ${path} ${problem}`, {
    cause,
    fix: `move it aside and enroll again (\`${ENROLL_COMMAND}\` makes a new key)`,
  });
}

/**
 * Makes a new Ed25519 key and writes it to `path` as PKCS#8 PEM, mode 0600, atomically and durably:
 * an O_EXCL temporary file beside it, fsync'd, then linked into place — never over a key already
 * there (it may be enrolled) — and the folder fsync'd so the name survives a power cut.
 */
export function createDeviceKey(path: string): DeviceKey {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  try {
    makeFolders(dir, 0o700);
    writeDurably(tmp, pem);
  } catch (err) {
    throw writeError(path, err);
  }
  try {
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw writeError(path, err);
    throw new DeviceKeyError(path, `device key file ${path} already exists: refusing to replace a key that may be enrolled`, {
      cause: err,
      fix: 'use it as it is; move it aside first only if no broker knows it',
    });
  } finally {
    unlinkSync(tmp);
  }
  try {
    syncFolder(dir);
  } catch (err) {
    throw writeError(path, err);
  }
  return new DeviceKey(privateKey);
}

/** The key at `path`, made first when there is none (what provisioning needs). */
export function ensureDeviceKey(path: string): { key: DeviceKey; created: boolean } {
  if (existsSync(path)) return { key: loadDeviceKey(path), created: false };
  return { key: createDeviceKey(path), created: true };
}

function writeDurably(path: string, text: string): void {
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants;
  const fd = openSync(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkSync(path);
    throw err;
  }
  closeSync(fd);
  // A root-run `botlink provision` writes for the daemon's user, who owns the folder.
  giveToFolderOwner(path);
}

function syncFolder(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writeError(path: string, err: unknown): DeviceKeyError {
  const code = (err as NodeJS.ErrnoException).code ?? String(err);
  return new DeviceKeyError(path, `cannot write the device key file ${path} (${code})`, {
    cause: err,
    fix: `make ${dirname(path)} a folder this user can write, on a writable disk with free space`,
  });
}
