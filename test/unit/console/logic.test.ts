import { describe, expect, it } from 'vitest';
import {
  apiPath,
  codeBody,
  faultOf,
  formatTime,
  keyIdMatches,
  parseRoute,
  pick,
  preauthLines,
  rejectAllBody,
  routeHash,
} from '../../../src/console/logic.js';

// The console's pure parts (src/console/logic.ts), in node: what the page decides without the DOM.
const KEY = '0123456789abcdef0123456789abcdef';

describe('the console routes', () => {
  it('reads each view from the hash, its filters from the query, and anything else as the summary', () => {
    expect(parseRoute('')).toEqual({ view: 'summary', query: {} });
    expect(parseRoute('#/devices?state=active&q=&vendorId=V1')).toEqual({ view: 'devices', query: { state: 'active', vendorId: 'V1' } });
    expect(parseRoute('#/device/bot%2F1%3Cx%3E')).toEqual({ view: 'device', id: 'bot/1<x>', query: {} });
    expect(parseRoute(`#/key/${KEY}`)).toEqual({ view: 'key', id: KEY, query: {} });
    for (const hash of ['#/nope', '#/devices/x', '#/device/', '#/device/a/b', '#/device/%E0%A4%A', '#/constructor', '#/__proto__'])
      expect(parseRoute(hash), hash).toEqual({ view: 'summary', query: {} });
  });

  it('writes a hash that reads back the same, the empty filters left out', () => {
    const hash = routeHash('pending', undefined, { vendorId: 'V1', q: 'SN-1&x=2', source: '', cursor: undefined });
    expect(hash).toBe('#/pending?vendorId=V1&q=SN-1%26x%3D2');
    expect(parseRoute(hash)).toEqual({ view: 'pending', query: { vendorId: 'V1', q: 'SN-1&x=2' } });
    expect(parseRoute(routeHash('device', 'a/b?c#d'))).toEqual({ view: 'device', id: 'a/b?c#d', query: {} });
  });

  it("sends the API only the list's own parameters", () => {
    const query = { state: 'active', cursor: 'c1', extra: 'x' };
    expect(apiPath('/devices', pick(query, ['state', 'vendorId', 'q', 'cursor']))).toBe('/devices?state=active&cursor=c1');
    expect(apiPath('/audit', pick({}, ['botId']))).toBe('/audit');
  });
});

describe('Accept asks for the whole keyId', () => {
  it('matches only all 32 characters of the row, spaces around them forgiven', () => {
    expect(keyIdMatches(KEY, KEY)).toBe(true);
    expect(keyIdMatches(`  ${KEY}\n`, KEY)).toBe(true);
    for (const typed of [
      '',
      KEY.slice(0, 31),
      `${KEY}0`,
      KEY.toUpperCase(),
      `${KEY.slice(0, 31)}e`,
      `${KEY.slice(0, 16)} ${KEY.slice(16)}`,
    ])
      expect(keyIdMatches(typed, KEY), typed).toBe(false);
    // A row whose keyId is not a keyId is never matched, even by itself.
    expect(keyIdMatches('abc', 'abc')).toBe(false);
  });
});

describe('the forms', () => {
  const form = { vendorId: ' V1 ', deviceId: '', anyDevice: false, uses: '', ttlS: '', kind: 'plain' };

  it('makes the body of a code, or says what is missing', () => {
    expect(codeBody({ ...form, anyDevice: true })).toEqual({ body: { vendorId: 'V1', anyDevice: true } });
    expect(codeBody({ ...form, deviceId: 'SN-1', uses: '3', ttlS: '600', kind: 'adopt' })).toEqual({
      body: { vendorId: 'V1', deviceId: 'SN-1', uses: 3, ttlS: 600, kind: 'adopt' },
    });
    expect(codeBody(form)).toEqual({ error: 'Give a deviceId, or tick Any device.' });
    expect(codeBody({ ...form, deviceId: 'SN-1', anyDevice: true })).toHaveProperty('error');
    expect(codeBody({ ...form, anyDevice: true, uses: '2.5' })).toEqual({ error: 'Uses must be a whole number.' });
  });

  it('numbers pasted lines as the API does, a last newline adding none', () => {
    expect(preauthLines('a,k1\r\nb,k2\n')).toEqual(['a,k1', 'b,k2']);
    expect(preauthLines('a,k1\n\nb,k2')).toEqual(['a,k1', '', 'b,k2']);
  });

  it('rejects all by vendor and source only, never without a filter nor with a serial prefix it cannot send', () => {
    expect(rejectAllBody({ vendorId: 'V1', source: '10.0.0.0/8' })).toEqual({ body: { vendorId: 'V1', source: '10.0.0.0/8' } });
    expect(rejectAllBody({})).toHaveProperty('error');
    expect(rejectAllBody({ vendorId: 'V1', q: 'SN-' })).toHaveProperty('error');
  });
});

describe('what the page shows', () => {
  it('tells times in UTC to the second, and none as a dash', () => {
    expect(formatTime(Date.UTC(2026, 11, 1, 21, 30, 5, 900))).toBe('2026-12-01 21:30:05Z');
    expect(formatTime(null)).toBe('\u2014');
    expect(formatTime(Number.NaN)).toBe('\u2014');
  });

  it("takes the API's {code, msg}, or names the status when a body has none", () => {
    expect(faultOf(409, { code: 'conflict', msg: 'taken' })).toEqual({ status: 409, code: 'conflict', msg: 'taken' });
    expect(faultOf(502, '<html>')).toEqual({ status: 502, code: 'http-502', msg: 'the broker answered 502' });
  });
});
