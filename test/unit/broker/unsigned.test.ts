import { describe, expect, it } from 'vitest';
import { UnsignedRefusals } from '../../../src/broker/auth/unsigned.js';
import { Refusal } from '../../../src/broker/refusal.js';

const refused = (u: UnsignedRefusals, source: string, now: number): number | undefined => {
  try {
    u.refuseIfOver(source, now);
    return undefined;
  } catch (err) {
    expect(err).toBeInstanceOf(Refusal);
    return (err as Refusal).retryAfterS;
  }
};

describe('UnsignedRefusals: unsigned refusals per source and minute, in memory', () => {
  it('holds a source off past its limit for the rest of that minute, and no other source', () => {
    const u = new UnsignedRefusals(3);
    for (let i = 0; i < 3; i++) u.count('192.0.2.1', 60_000 + i);
    expect(refused(u, '192.0.2.1', 60_010)).toBeUndefined();
    u.count('192.0.2.1', 60_020);
    expect(refused(u, '192.0.2.1', 110_000)).toBe(10);
    expect(refused(u, '192.0.2.2', 110_000)).toBeUndefined();
    // The next minute starts afresh.
    expect(refused(u, '192.0.2.1', 120_000)).toBeUndefined();
  });

  it('counts an IPv6 source by its /64, and an IPv4-mapped one as its IPv4 address', () => {
    const u = new UnsignedRefusals(1);
    u.count('2001:db8:1:2::1', 0);
    u.count('2001:db8:1:2::ffff', 1);
    expect(refused(u, '2001:db8:1:2::9', 2)).toBe(60);
    u.count('::ffff:192.0.2.9', 3);
    u.count('192.0.2.9', 4);
    expect(refused(u, '192.0.2.9', 5)).toBe(60);
  });

  it('keeps a bounded map: past its sources, new ones share one count', () => {
    const u = new UnsignedRefusals(2, 3);
    for (const s of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) u.count(s, 0);
    for (const s of ['10.0.0.4', '10.0.0.5', '10.0.0.6']) u.count(s, 0);
    expect(u.sources).toBe(4);
    expect(refused(u, '10.0.0.99', 1)).toBe(60);
    expect(refused(u, '10.0.0.1', 1)).toBeUndefined();
  });
});
