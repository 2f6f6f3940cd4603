import { createPrivateKey, generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, fsyncSync, linkSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { inspect } from 'node:util';
import { giveToFolderOwner, makeFolders } from '../../ownership.js';
import { base64url, keyIdOf, rawPublicKeyOf, type SignedRequestParts, signRequest } from '../../protocol/device-sig.js';
import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';
import { type PrivateFileRules, readPrivateFile } from './private-file.js';

/** A PKCS#8 PEM of an Ed25519 key is 119 bytes; anything far bigger is the wrong file. */
const MAX_KEY_BYTES = 4096;

/** The device's Ed25519 key (DESIGN §3.7); printed or serialised it shows only its keyId. */
export class DeviceKey {
  readonly #key: KeyObject;
  /** Lower-case hex of the first 16 bytes of SHA-256 over the raw public key. */
  readonly keyId: string;
  /** base64url (no padding) of the 32 raw public-key bytes, as /v1/enroll takes it. */
  readonly publicKey: string;

  constructor(privateKey: KeyObject) {
    const raw = rawPublicKeyOf(privateKey);
    this.#key = privateKey;
    this.keyId = keyIdOf(raw);
    this.publicKey = base64url(raw);
  }

  /** The Authorization header of one request to the broker. */
  authorize(req: Omit<SignedRequestParts, 'keyId'>): string {
    return signRequest(this.#key, { ...req, keyId: this.keyId });
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
  credential: 'device-key',
  createHint: (path) => `enroll this device with \`${ENROLL_COMMAND}\`, which makes the key at ${path}`,
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
