/**
 * The broker's own secrets: the token key (one file, the same on every replica, never beside the
 * store) from which the keys of codes, admin tokens, console sessions, cursors and tokens at rest are derived, and the account secret.
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, type KeyObject, randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { type PrivateFileRules, readPrivateFile } from '../private-file.js';
import { BrokerConfigError } from './config-error.js';

export interface BrokerKeys {
  /** HMAC-SHA256 of a normalised enrollment code (hex): what the store keeps instead of the code. */
  codeHmac(normalised: string): string;
  seal(plain: string): Buffer;
  /** Throws when the sealed bytes were not made with this key or were changed. */
  open(sealed: Buffer): string;
  /** HMAC-SHA256 (hex) of an admin token: what the store keeps instead of it. */
  adminTokenHmac(token: string): string;
  /** HMAC-SHA256 (hex) of a console session id: what the store keeps instead of it. */
  sessionHmac(sessionId: string): string;
  /** HMAC-SHA256 (base64url) of an admin API cursor, so a cursor the broker did not make is refused. */
  cursorMac(cursor: string): string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A token key is 32 bytes, or 64 hex characters and a newline: anything bigger is the wrong file. */
const MAX_TOKEN_KEY_BYTES = 66;
/** A SecretKey is a short token. */
const MAX_SECRET_BYTES = 4096;

/**
 * The rules of a private file of the broker's (readPrivateFile): a regular file, owned by the broker's
 * user or root, readable by no one else — checked on the opened descriptor — else exit 78 naming it.
 */
export function brokerFileRules(key: string, noun: string, credential: string, createHint: (path: string) => string): PrivateFileRules {
  return {
    noun,
    user: "the broker's user",
    credential,
    createHint,
    refuse: (_path, message, options) => new BrokerConfigError(key, message, options),
  };
}

const makeTokenKey = (file: string): string =>
  `make one on the broker's host, away from the store: \`sh -c 'umask 077 && head -c 32 /dev/urandom > ${file}'\` (the same file on every replica)`;

/**
 * tokenKeyFile must not sit in the folder of a SQLite store (or below it): a backup of the store would
 * carry the key that opens its tokens and codes.
 */
export function refuseKeyBesideStore(tokenKeyFile: string, store: string): void {
  if (!store.startsWith('sqlite:')) return;
  const real = (path: string): string => {
    try {
      return realpathSync(path);
    } catch {
      return resolve(path);
    }
  };
  const storeDir = real(dirname(store.slice('sqlite:'.length)));
  const keyDir = real(dirname(tokenKeyFile));
  if (keyDir !== storeDir && !keyDir.startsWith(`${storeDir}${sep}`)) return;
  throw new BrokerConfigError(
    'tokenKeyFile',
    `tokenKeyFile ${tokenKeyFile} is in ${storeDir}, the SQLite store's folder: a backup of the store would carry the key to it`,
    { fix: 'keep it elsewhere, as the package does (/etc/botlink-broker/token-key, passed to the unit as the credential token-key)' },
  );
}

export function readTokenKey(file: string): Buffer {
  const raw = readPrivateFile(file, brokerFileRules('tokenKeyFile', 'tokenKeyFile', 'token-key', makeTokenKey), MAX_TOKEN_KEY_BYTES);
  if (raw.length === 32) return raw;
  const text = raw.toString('latin1').trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  throw new BrokerConfigError('tokenKeyFile', `${file} must hold 32 random bytes, raw or as 64 hex characters`, {
    fix: makeTokenKey(file),
  });
}

/** The store's password from storePasswordFile (a private file, one line), when the config names one. */
export function readStorePassword(file: string | null): string | undefined {
  if (file === null) return undefined;
  const rules = brokerFileRules(
    'storePasswordFile',
    'storePasswordFile',
    'store-password',
    (path) => `write the store's password into ${path}, mode 0600`,
  );
  const raw = readPrivateFile(file, rules, MAX_SECRET_BYTES);
  if (raw.length > MAX_SECRET_BYTES) throw new BrokerConfigError('storePasswordFile', `${file} is larger than a password can be`);
  const password = raw.toString('utf8').replace(/\r?\n$/, '');
  if (password === '') throw new BrokerConfigError('storePasswordFile', `${file} is empty`);
  return password;
}

export function readAccountSecret(file: string): string {
  const rules = brokerFileRules(
    'secretKeyFile',
    'secretKeyFile',
    'secret-key',
    (path) =>
      `point secretKeyFile at the file that holds the SecretKey (\`chmod 600 ${path}\`), or pass it as the systemd credential secret-key`,
  );
  const raw = readPrivateFile(file, rules, MAX_SECRET_BYTES);
  if (raw.length > MAX_SECRET_BYTES) throw new BrokerConfigError('secretKeyFile', `${file} is larger than a SecretKey can be`);
  const secret = raw.toString('utf8').replace(/\r?\n$/, '');
  if (secret === '') throw new BrokerConfigError('secretKeyFile', `${file} is empty`);
  return secret;
}

export function brokerKeys(tokenKey: Buffer): BrokerKeys {
  // KeyObjects, made once: node checks a Buffer key again on every cipher and HMAC, the larger part of their cost.
  const derive = (info: string): KeyObject => createSecretKey(Buffer.from(hkdfSync('sha256', tokenKey, Buffer.alloc(0), info, 32)));
  const codeKey = derive('botlink-broker enrollment codes');
  const sealKey = derive('botlink-broker tokens at rest');
  const adminTokenKey = derive('botlink-broker admin tokens');
  const sessionKey = derive('botlink-broker admin sessions');
  const cursorKey = derive('botlink-broker admin cursors');
  return {
    adminTokenHmac: (token) => createHmac('sha256', adminTokenKey).update(token, 'utf8').digest('hex'),
    sessionHmac: (id) => createHmac('sha256', sessionKey).update(id, 'utf8').digest('hex'),
    cursorMac: (cursor) => createHmac('sha256', cursorKey).update(cursor, 'utf8').digest('base64url'),
    codeHmac: (normalised) => createHmac('sha256', codeKey).update(normalised, 'utf8').digest('hex'),
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', sealKey, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]);
    },
    open(sealed) {
      const decipher = createDecipheriv('aes-256-gcm', sealKey, sealed.subarray(0, IV_BYTES));
      decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    },
  };
}
