import { describe, expect, it } from 'vitest';
import { addressBucket, judge, type RateLimit, windowOf } from '../../../src/broker/auth/limits.js';
import { Refusal } from '../../../src/broker/refusal.js';

const minute: RateLimit = { kind: 'code', id: 'h1', windowMs: 60_000, max: 5 };

describe('rate limits: one mechanism for every route', () => {
  it.each<[string, number, { bucket: string; start: number; limit: number }]>([
    ['the window a time falls in', 125_000, { bucket: 'code:h1/60000', start: 120_000, limit: 5 }],
    ['a window starts at its own first ms', 120_000, { bucket: 'code:h1/60000', start: 120_000, limit: 5 }],
    ['and ends just before the next', 179_999, { bucket: 'code:h1/60000', start: 120_000, limit: 5 }],
  ])('windowOf: %s', (_, now, expected) => {
    expect(windowOf(minute, now)).toEqual(expected);
  });

  it("a botId and an hour make the token route's bucket: every key of the botId counts in it", () => {
    expect(windowOf({ kind: 'bot', id: 'bot-1', windowMs: 3_600_000, max: 12 }, 7_200_001)).toEqual({
      bucket: 'bot:bot-1/3600000',
      start: 7_200_000,
      limit: 12,
    });
  });

  it.each<[string, number, number, number | undefined]>([
    ['up to the limit passes', 5, 125_000, undefined],
    ['one past it is refused until the window ends', 6, 125_000, 55],
    ['Retry-After rounds up to whole seconds', 6, 179_001, 1],
    ['and is never under a second', 7, 179_999, 1],
  ])('judge: %s', (_, count, now, retryAfterS) => {
    const limited: string[] = [];
    const metrics = { rateLimited: (kind: string) => void limited.push(kind) };
    let thrown: unknown;
    try {
      judge(metrics, minute, count, now);
    } catch (err) {
      thrown = err;
    }
    if (retryAfterS === undefined) {
      expect([thrown, limited]).toEqual([undefined, []]);
      return;
    }
    expect(thrown).toBeInstanceOf(Refusal);
    const refusal = thrown as Refusal;
    expect([refusal.code, refusal.status, refusal.retryAfterS, refusal.message, limited]).toEqual([
      'rate-limited',
      429,
      retryAfterS,
      'more than 5 requests in 60 s',
      ['code'],
    ]);
  });

  it.each([
    ['an IPv4 address, whole', '192.0.2.7', '192.0.2.7'],
    ['an IPv4-mapped IPv6 address, as its IPv4 address', '::ffff:192.0.2.7', '192.0.2.7'],
    ['an IPv6 address, by its /64', '2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['with :: inside the /64', '2001:db8::5:6', '2001:db8:0:0::/64'],
    ['with :: after it', '2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['leading zeros and case do not split a /64', '2001:0DB8:0001:0002::1', '2001:db8:1:2::/64'],
    ['loopback', '::1', '0:0:0:0::/64'],
  ])('addressBucket: %s', (_, address, bucket) => {
    expect(addressBucket(address)).toBe(bucket);
  });
});
