/**
 * The broker's own secrets: the token key (one file, the same on every replica, never beside the
 * store) from which the code HMAC key and the token sealing key are derived, and the account secret.
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, type KeyObject, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { messageOf } from '../protocol/errors.js';
import { BrokerConfigError } from './config.js';

export interface BrokerKeys {
  /** HMAC-SHA256 of a normalised enrollment code (hex): what the store keeps instead of the code. */
  codeHmac(normalised: string): string;
  seal(plain: string): Buffer;
  /** Throws when the sealed bytes were not made with this key or were changed. */
  open(sealed: Buffer): string;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

export function readTokenKey(file: string): Buffer {
  let raw: Buffer;
  try {
    raw = readFileSync(file);
  } catch (err) {
    throw new BrokerConfigError('tokenKeyFile', `cannot read tokenKeyFile ${file} (${messageOf(err)})`, {
      fix: `make one on the broker's host, away from the store: \`head -c 32 /dev/urandom > ${file} && chmod 600 ${file}\` (the same file on every replica)`,
    });
  }
  if (raw.length === 32) return raw;
  const text = raw.toString('latin1').trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  throw new BrokerConfigError('tokenKeyFile', `${file} must hold 32 random bytes, raw or as 64 hex characters`, {
    fix: `\`head -c 32 /dev/urandom > ${file}\``,
  });
}

export function readAccountSecret(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new BrokerConfigError('secretKeyFile', `cannot read secretKeyFile ${file} (${messageOf(err)})`, {
      fix: 'point secretKeyFile at the file that holds the SecretKey, or pass it as the systemd credential secret-key',
    });
  }
  const secret = text.replace(/\r?\n$/, '');
  if (secret === '') throw new BrokerConfigError('secretKeyFile', `${file} is empty`);
  return secret;
}

export function brokerKeys(tokenKey: Buffer): BrokerKeys {
  // KeyObjects, made once: node checks a Buffer key again on every cipher and HMAC, the larger part of their cost.
  const derive = (info: string): KeyObject => createSecretKey(Buffer.from(hkdfSync('sha256', tokenKey, Buffer.alloc(0), info, 32)));
  const codeKey = derive('botlink-broker enrollment codes');
  const sealKey = derive('botlink-broker tokens at rest');
  return {
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
