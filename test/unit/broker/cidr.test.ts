import { describe, expect, it } from 'vitest';
import { parseCidr } from '../../../src/broker/cidr.js';

// `broker pending --source` and `broker reject --source` (DESIGN §3.1): a block, or one address.
describe('parseCidr', () => {
  it.each<[string, string, boolean]>([
    ['10.1.0.0/16', '10.1.200.3', true],
    ['10.1.0.0/16', '10.2.0.1', false],
    ['10.1.0.0/16', '::ffff:10.1.0.9', true],
    ['192.0.2.7', '192.0.2.7', true],
    ['192.0.2.7', '192.0.2.8', false],
    ['2001:db8::/32', '2001:db8:1::5', true],
    ['2001:db8::/32', '2001:db9::5', false],
    ['10.0.0.0/8', '2001:db8::1', false],
    ['0.0.0.0/0', '203.0.113.1', true],
  ])('%s holds %s: %s', (cidr, address, held) => {
    expect(parseCidr(cidr)?.(address)).toBe(held);
  });

  it.each(['10.0.0.0/33', '2001:db8::/129', 'example.com', '10.0.0.0/', '10.0.0.0/8/8', ''])('refuses %j', (text) => {
    expect(parseCidr(text)).toBeUndefined();
  });
});
