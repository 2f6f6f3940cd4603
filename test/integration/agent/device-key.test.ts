import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createDeviceKey, DeviceKey, DeviceKeyError, ensureDeviceKey, loadDeviceKey } from '../../../src/agent/config/device-key.js';
import { parseDeviceAuthorization, publicKeyFromWire, verifyRequest } from '../../../src/protocol/device-sig.js';
import { useHarness } from '../../helpers/harness.js';
import { requireRoot } from '../../../scripts/lib/tools.js';

const { tempDir } = useHarness();

function refusal(fn: () => unknown): DeviceKeyError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DeviceKeyError);
    const e = err as DeviceKeyError;
    expect([e.code, e.retry]).toEqual(['ERR_DEVICE_KEY', 'needs-config']);
    return e;
  }
  throw new Error('expected a DeviceKeyError');
}

describe('createDeviceKey', () => {
  it('writes an Ed25519 PKCS#8 PEM with mode 0600 into a new folder, leaving no temporary file', () => {
    const dir = join(tempDir('botlink-key-'), 'state');
    const path = join(dir, 'device-key.pem');
    const key = createDeviceKey(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readFileSync(path, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END PRIVATE KEY-----\n$/);
    expect(readdirSync(dir)).toEqual(['device-key.pem']);
    expect(key.keyId).toMatch(/^[0-9a-f]{32}$/);
    expect(key.publicKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(loadDeviceKey(path).keyId).toBe(key.keyId);
  });

  it('signs requests the broker verifies with the public key it was given (DESIGN §3.7)', () => {
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    const key = createDeviceKey(path);
    const body = Buffer.from('{"minValidityS":1800}');
    const header = key.authorize({ method: 'POST', path: '/v1/token', ts: '1764000000000', nonce: 'AAAAAAAAAAAAAAAAAAAAAA', body });
    const auth = parseDeviceAuthorization(header);
    const wire = publicKeyFromWire(key.publicKey);
    expect([auth.keyId, wire.keyId]).toEqual([key.keyId, key.keyId]);
    expect(verifyRequest(wire.key, auth, 'POST', '/v1/token', body)).toBe(true);
    expect(verifyRequest(wire.key, auth, 'POST', '/v1/enroll', body)).toBe(false);
  });

  it('never replaces a key already there, which may be enrolled', () => {
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    const first = createDeviceKey(path);
    const before = readFileSync(path);
    const e = refusal(() => createDeviceKey(path));
    expect(e.message).toBe(`device key file ${path} already exists: refusing to replace a key that may be enrolled`);
    expect(readFileSync(path)).toEqual(before);
    expect(readdirSync(join(path, '..'))).toEqual(['device-key.pem']);
    expect(ensureDeviceKey(path)).toEqual({ key: expect.objectContaining({ keyId: first.keyId }), created: false });
  });

  it('ensureDeviceKey makes the key once, then loads it', () => {
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    const made = ensureDeviceKey(path);
    expect(made.created).toBe(true);
    expect(ensureDeviceKey(path).key.keyId).toBe(made.key.keyId);
  });

  it('says which folder to fix when it cannot write', () => {
    const dir = tempDir('botlink-key-');
    writeFileSync(join(dir, 'file'), '');
    const path = join(dir, 'file', 'device-key.pem');
    const e = refusal(() => createDeviceKey(path));
    expect(e.message).toMatch(/^cannot write the device key file .* \((ENOTDIR|EEXIST)\)$/);
    expect(e.fix).toContain(join(dir, 'file'));
  });
});

describe('loadDeviceKey: checked at load, imported into OpenSSL at first use', () => {
  it('a key read lazily has the keyId, public key and signatures of the same key imported at once', () => {
    const dir = tempDir('botlink-key-');
    const { privateKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const lf = join(dir, 'lf.pem');
    const crlf = join(dir, 'crlf.pem');
    writeFileSync(lf, pem, { mode: 0o600 });
    // CRLF is not the one shape read without OpenSSL: this copy is imported at load, as every other shape is.
    writeFileSync(crlf, pem.replaceAll('\n', '\r\n'), { mode: 0o600 });
    const now = new DeviceKey(privateKey);
    const req = { method: 'POST', path: '/v1/token', ts: '1764000000000', nonce: 'AAAAAAAAAAAAAAAAAAAAAA', body: Buffer.from('{}') };
    for (const key of [loadDeviceKey(lf), loadDeviceKey(crlf)]) {
      // Ed25519 signatures are deterministic: one key, one message, one signature.
      expect(key.authorize(req)).toBe(now.authorize(req));
      expect([key.keyId, key.publicKey]).toEqual([now.keyId, now.publicKey]);
    }
    expect(loadDeviceKey(lf).keyId).toBe(now.keyId);
  });

  it('an X25519 key, the same length as an Ed25519 one, is refused at load by name', () => {
    const path = join(tempDir('botlink-key-'), 'x25519.pem');
    writeFileSync(path, generateKeyPairSync('x25519').privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    expect(refusal(() => loadDeviceKey(path)).message).toBe(`device key file ${path} holds an x25519 key, not Ed25519`);
  });
});

describe('DeviceKey: printing it shows the keyId, never the key', () => {
  it('inspect, JSON and String', () => {
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    const key = createDeviceKey(path);
    const pemBody = readFileSync(path, 'utf8').split('\n')[1]!;
    for (const shown of [inspect(key), JSON.stringify({ key }), String(key), inspect({ nested: { key } })]) {
      expect(shown).toContain(key.keyId);
      expect(shown).not.toContain(pemBody);
      expect(shown).not.toContain('PRIVATE');
    }
  });
});

describe('loadDeviceKey refuses what it must not use, with the fix', () => {
  it('a key open to group or others: chmod, and re-enrollment if it may have been read', () => {
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    createDeviceKey(path);
    for (const mode of [0o640, 0o604, 0o644]) {
      chmodSync(path, mode);
      const e = refusal(() => loadDeviceKey(path));
      const shown = mode.toString(8).padStart(4, '0');
      expect(e.message).toBe(`device key file ${path} has mode ${shown}, open to group or others; refusing to use it`);
      expect(e.fix).toMatch(new RegExp(`^run \`chmod 600 ${path}\`; .*revoke.*botlink provision --broker URL --code CODE --device-id SN`));
    }
  });

  it('a missing file: enroll, which makes it', () => {
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    const e = refusal(() => loadDeviceKey(path));
    expect(e.message).toBe(`device key file ${path} does not exist`);
    expect(e.fix).toContain('botlink provision --broker URL --code CODE --device-id SN');
  });

  it('a folder, a file that is no key, an RSA key, and an oversized file', () => {
    const dir = tempDir('botlink-key-');
    const folder = join(dir, 'folder');
    mkdirSync(folder, { mode: 0o700 });
    expect(refusal(() => loadDeviceKey(folder)).message).toBe(`device key file ${folder} is not a regular file`);
    const text = join(dir, 'text');
    writeFileSync(text, 'not a key\n', { mode: 0o600 });
    expect(refusal(() => loadDeviceKey(text)).message).toBe(`device key file ${text} holds no private key in PEM`);
    const rsa = join(dir, 'rsa.pem');
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    writeFileSync(rsa, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    expect(refusal(() => loadDeviceKey(rsa)).message).toBe(`device key file ${rsa} holds an rsa key, not Ed25519`);
    const big = join(dir, 'big');
    writeFileSync(big, 'x'.repeat(5000), { mode: 0o600 });
    expect(refusal(() => loadDeviceKey(big)).message).toBe(`device key file ${big} is too big for an Ed25519 key`);
  });

  it('a key owned by another non-root user (this test runs as root and chowns for real)', () => {
    requireRoot('this test chowns a device key to uid 4242');
    const path = join(tempDir('botlink-key-'), 'device-key.pem');
    createDeviceKey(path);
    chownSync(path, 4242, 4242);
    const e = refusal(() => loadDeviceKey(path));
    expect(e.message).toBe(`device key file ${path} is owned by uid 4242, which is neither this user (uid 0) nor root; refusing to use it`);
    expect(e.fix).toBe(`run \`sudo chown root: ${path}\``);
  });
});
