/** Rate limits (DESIGN §3.7), counted by the store in fixed windows so every replica sees one count. */
import { isIPv6 } from 'node:net';
import type { BrokerContext } from './context.js';
import { Refusal } from './refusal.js';

/** One hit in `bucket`'s current window; 429 with Retry-After once the window holds more than `limit`. */
export async function limitOrRefuse(
  ctx: Pick<BrokerContext, 'store' | 'clock' | 'metrics'>,
  bucket: string,
  windowMs: number,
  limit: number,
): Promise<void> {
  const now = ctx.clock.wallNow();
  const windowStart = Math.floor(now / windowMs) * windowMs;
  const count = await ctx.store.hit(`${bucket}/${windowMs}`, windowStart);
  if (count > limit) {
    ctx.metrics.rateLimited(bucket.slice(0, bucket.indexOf(':')));
    throw new Refusal('rate-limited', `more than ${limit} requests in ${windowMs / 1000} s`, {
      retryAfterS: Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000)),
    });
  }
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
