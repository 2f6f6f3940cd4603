import { describe, expect, it } from 'vitest';
import { addressBucket } from '../../../src/broker/auth/limits.js';
import { requestSource } from '../../../src/broker/source.js';

// DESIGN §3.7's source: the peer, or behind a trusted proxy the rightmost forwarded address that is not one.
const PROXIES = new Set(['10.0.0.1', '10.0.0.2', '2001:db8::1']);

describe('requestSource', () => {
  it.each<[string, string, string | string[] | undefined, string]>([
    ['a peer that is no proxy: its header ignored', '198.51.100.7', '203.0.113.9', '198.51.100.7'],
    ['a trusted proxy without the header', '10.0.0.1', undefined, '10.0.0.1'],
    ['a trusted proxy: the address it was told', '10.0.0.1', '203.0.113.9', '203.0.113.9'],
    ['the rightmost address not itself a proxy', '10.0.0.1', '192.0.2.55, 203.0.113.9, 10.0.0.2', '203.0.113.9'],
    ['a client cannot pick its source by writing to the left', '10.0.0.1', '1.2.3.4,203.0.113.9', '203.0.113.9'],
    ['every hop a proxy: the peer', '10.0.0.1', '10.0.0.2, 10.0.0.1', '10.0.0.1'],
    ['a malformed header: the peer', '10.0.0.1', '203.0.113.9, not-an-address', '10.0.0.1'],
    ['an empty header: the peer', '10.0.0.1', '', '10.0.0.1'],
    ['a header sent twice reads as one list', '10.0.0.1', ['192.0.2.55', '203.0.113.9'], '203.0.113.9'],
    ['an IPv4-mapped peer is its IPv4 address', '::ffff:198.51.100.7', undefined, '198.51.100.7'],
    ['an IPv4-mapped proxy is trusted as its IPv4 address', '::FFFF:10.0.0.1', '::ffff:203.0.113.9', '203.0.113.9'],
    ['an IPv6 proxy and client', '2001:db8::1', '2001:db8:1:2:3::4', '2001:db8:1:2:3::4'],
  ])('%s', (_, peer, header, source) => {
    expect(requestSource(peer, header, PROXIES)).toBe(source);
  });
});

describe('addressBucket: what a source is limited by', () => {
  it.each([
    ['198.51.100.7', '198.51.100.7'],
    ['::ffff:198.51.100.7', '198.51.100.7'],
    ['2001:db8:1:2:3::4', '2001:db8:1:2::/64'],
    ['2001:DB8:1:2:ffff::9', '2001:db8:1:2::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('%s → %s', (address, bucket) => {
    expect(addressBucket(address)).toBe(bucket);
  });
});
