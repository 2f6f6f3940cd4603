/** Rate limits (DESIGN §3.7), counted by the store in fixed windows so every replica sees one count. */
import { isIPv6 } from 'node:net';
import type { BrokerContext } from './context.js';
import { Refusal } from './refusal.js';

/** A limit on `bucket` (`kind:id`): at most `limit` requests in each fixed window of `windowMs`. */
export interface Limit {
  bucket: string;
  windowMs: number;
  limit: number;
}

/** Where the store counts `l` at `now`: the bucket's key and its current window's start. */
export function windowOf(l: Limit, now: number): { key: string; windowStart: number } {
  return { key: `${l.bucket}/${l.windowMs}`, windowStart: Math.floor(now / l.windowMs) * l.windowMs };
}

/** 429 with Retry-After once the window starting at `windowStart` holds more than the limit (`count` after this hit). */
export function refuseOverLimit(ctx: Pick<BrokerContext, 'metrics'>, l: Limit, count: number, windowStart: number, now: number): void {
  if (count <= l.limit) return;
  ctx.metrics.rateLimited(l.bucket.slice(0, l.bucket.indexOf(':')));
  throw new Refusal('rate-limited', `more than ${l.limit} requests in ${l.windowMs / 1000} s`, {
    retryAfterS: Math.max(1, Math.ceil((windowStart + l.windowMs - now) / 1000)),
  });
}

/** One hit in `bucket`'s current window; 429 with Retry-After once the window holds more than `limit`. */
export async function limitOrRefuse(
  ctx: Pick<BrokerContext, 'store' | 'clock' | 'metrics'>,
  bucket: string,
  windowMs: number,
  limit: number,
): Promise<void> {
  const now = ctx.clock.wallNow();
  const l = { bucket, windowMs, limit };
  const { key, windowStart } = windowOf(l, now);
  refuseOverLimit(ctx, l, await ctx.store.hit(key, windowStart), windowStart, now);
}

/** A source address as a limit counts it: IPv6 by its /64 (one host owns a whole /64), IPv4 whole. */
export function addressBucket(address: string): string {
  const plain = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  if (!isIPv6(plain)) return plain;
  const [head = '', tail = ''] = plain.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === '' ? [] : tail.split(':');
  const groups = plain.includes('::') ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
