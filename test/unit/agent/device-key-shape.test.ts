import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ed25519Pkcs8 } from '../../../src/agent/config/device-key.js';

/** A fresh Ed25519 key as OpenSSL writes it (RFC 8410 PKCS#8 v1), and its DER. */
function ed25519(): { pem: Buffer; der: Buffer } {
  const { privateKey } = generateKeyPairSync('ed25519');
  return {
    pem: Buffer.from(privateKey.export({ type: 'pkcs8', format: 'pem' })),
    der: privateKey.export({ type: 'pkcs8', format: 'der' }),
  };
}

function edited(pem: Buffer, at: number, char: string): Buffer {
  const copy = Buffer.from(pem);
  copy[at] = char.charCodeAt(0);
  return copy;
}

describe('ed25519Pkcs8: the one shape checked without OpenSSL', () => {
  it("returns the DER of every key OpenSSL writes, across many keys (every base64 character's value is met)", () => {
    for (let i = 0; i < 200; i++) {
      const { pem, der } = ed25519();
      expect(ed25519Pkcs8(pem)).toEqual(der);
    }
  });

  it('leaves every other text to OpenSSL: null', () => {
    const { pem } = ed25519();
    const text = pem.toString('latin1');
    const x25519 = Buffer.from(generateKeyPairSync('x25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const cases: [string, Buffer][] = [
      ['CRLF line ends', Buffer.from(text.replaceAll('\n', '\r\n'), 'latin1')],
      ['no newline at the end', pem.subarray(0, -1)],
      ['a blank line after it', Buffer.concat([pem, Buffer.from('\n')])],
      ['an X25519 key: same length, another OID', x25519],
      ['an encrypted-key label', Buffer.from(text.replace('BEGIN PRIVATE', 'BEGIN ENCRYPTED'), 'latin1')],
      ['the end line altered', edited(pem, pem.length - 3, 'X')],
      ['a character outside base64 (URL-safe -)', edited(pem, 40, '-')],
      ['a padding character inside', edited(pem, 90, '=')],
      ['a non-ASCII byte', edited(pem, 60, '\u00e9')],
      ['an empty file', Buffer.alloc(0)],
    ];
    for (const [name, input] of cases) expect([name, ed25519Pkcs8(input)]).toEqual([name, null]);
  });

  it('the prefix is checked byte by byte: any one changed bit of its base64 is refused', () => {
    const { pem } = ed25519();
    // "-----BEGIN PRIVATE KEY-----\n" is 28 bytes; the first 21 base64 characters carry the 16-byte prefix.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    for (let at = 28; at < 28 + 21; at++) {
      const other = alphabet[(alphabet.indexOf(String.fromCharCode(pem[at] as number)) + 1) % 64] as string;
      expect(ed25519Pkcs8(edited(pem, at, other))).toBeNull();
    }
  });
});
