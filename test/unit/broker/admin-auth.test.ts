import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { refuseCrossOrigin, refuseForeignHost, sessionCookie } from '../../../src/broker/admin/auth.js';
import { Cursors } from '../../../src/broker/admin/cursor.js';

// The admin listener's decisions from headers alone (DESIGN §3.8): the cookie's Origin table, the Host, and cursors.
const ORIGIN = 'https://broker.example.com:8443';
const status = (fn: () => void): number | 'ok' => {
  try {
    fn();
    return 'ok';
  } catch (err) {
    return (err as { status: number }).status;
  }
};

describe('a cookie request’s Origin and Sec-Fetch-Site', () => {
  it.each([
    ['GET', {}, 'ok'],
    ['HEAD', {}, 'ok'],
    ['GET', { origin: ORIGIN }, 'ok'],
    ['GET', { origin: 'https://broker.example.com' }, 403],
    ['GET', { origin: 'null' }, 403],
    ['GET', { 'sec-fetch-site': 'same-origin' }, 'ok'],
    ['GET', { 'sec-fetch-site': 'none' }, 'ok'],
    ['GET', { 'sec-fetch-site': 'same-site' }, 403],
    ['GET', { 'sec-fetch-site': 'cross-site' }, 403],
    ['POST', {}, 403],
    ['POST', { origin: 'null' }, 403],
    ['POST', { origin: ORIGIN }, 'ok'],
    ['POST', { origin: `${ORIGIN}/` }, 403],
    ['DELETE', { origin: ORIGIN, 'sec-fetch-site': 'cross-site' }, 'ok'],
    ['DELETE', { origin: 'https://evil.example', 'sec-fetch-site': 'same-origin' }, 403],
  ] as const)('%s with %j: %s', (method, headers, expected) => {
    expect(status(() => refuseCrossOrigin(method, headers, ORIGIN))).toBe(expected);
  });
});

describe('the Host and the cookie', () => {
  const req = (headers: Record<string, string>) => ({ headers }) as unknown as Parameters<typeof refuseForeignHost>[0];

  it('takes only the origin’s host and port', () => {
    expect(status(() => refuseForeignHost(req({ host: 'broker.example.com:8443' }), ORIGIN))).toBe('ok');
    expect(status(() => refuseForeignHost(req({ host: 'BROKER.example.com:8443' }), ORIGIN))).toBe('ok');
    for (const host of ['broker.example.com', 'evil.example:8443', 'broker.example.com:8443@evil', ''])
      expect(
        status(() => refuseForeignHost(req({ host }), ORIGIN)),
        host,
      ).toBe(400);
    expect(status(() => refuseForeignHost(req({}), ORIGIN))).toBe(400);
    expect(status(() => refuseForeignHost(req({ host: 'broker.example.com' }), 'https://broker.example.com'))).toBe('ok');
  });

  it('reads the session cookie among others', () => {
    expect(sessionCookie(req({ cookie: 'a=1; botlink_admin=abc; b=2' }))).toBe('abc');
    expect(sessionCookie(req({ cookie: 'xbotlink_admin=abc' }))).toBeUndefined();
    expect(sessionCookie(req({}))).toBeUndefined();
  });
});

describe('cursors', () => {
  const cursors = new Cursors({ cursorMac: (text) => createHmac('sha256', 'k').update(text).digest('base64url') });

  it('carry their key back only to the list and filters they were made for', () => {
    const filters = { state: 'active', vendorId: undefined, q: 'SN' };
    const cursor = cursors.make('devices', filters, ['V1', 'SN-1', 'k1']);
    expect(cursors.read('devices', { q: 'SN', state: 'active' }, cursor)).toEqual(['V1', 'SN-1', 'k1']);
    expect(status(() => cursors.read('devices', { state: 'active' }, cursor))).toBe(400);
    expect(status(() => cursors.read('devices', { ...filters, q: 'SN-' }, cursor))).toBe(400);
    expect(status(() => cursors.read('audit', filters, cursor))).toBe(400);
    const [payload, mac] = cursor.split('.');
    const forged = `${Buffer.from(JSON.stringify(['V1', 'ZZ', 'k'])).toString('base64url')}.${mac}`;
    expect(status(() => cursors.read('devices', filters, forged))).toBe(400);
    expect(status(() => cursors.read('devices', filters, `${payload}.${mac}.x`))).toBe(400);
    expect(status(() => cursors.read('devices', filters, 'garbage'))).toBe(400);
  });
});
