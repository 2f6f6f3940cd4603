/**
 * Rate limits (DESIGN §3.7), one mechanism for every route: a limit names its kind and what it counts, the
 * store counts each request in the limit's fixed window in the step that takes the request's nonce (so
 * every replica sees one count), and a count past the limit is refused with Retry-After.
 */
import { isIPv6 } from 'node:net';
import { Refusal } from '../refusal.js';
import type { RateWindow } from '../store/types.js';
import { plainAddress } from '../source.js';

/**
 * bot: token requests of a botId, across all its keys; check: checks of a botId (its own count, not the
 * tokens'); rotate: rotations of a botId; code: enrollment attempts with a code; addr: attempts with
 * unknown codes, per source; ask: a pending key's asks; first-ask: code-less enrollments' first asks, per source.
 */
export const LIMIT_KINDS = ['bot', 'check', 'rotate', 'code', 'addr', 'ask', 'first-ask'] as const;
export type LimitKind = (typeof LIMIT_KINDS)[number];

/** At most `max` requests counted against `kind:id` in each fixed window of `windowMs`. */
export interface RateLimit {
  kind: LimitKind;
  id: string;
  windowMs: number;
  max: number;
}

/** The kinds of a botId's counts `broker reset-limits` clears: its hourly ones, not its rotations (rotatePerDay). */
export const RESET_LIMIT_KINDS: readonly LimitKind[] = ['bot', 'check'];

/** What every bucket of `kind` for `id` begins with, whatever its window. */
export function bucketPrefix(kind: LimitKind, id: string): string {
  return `${kind}:${id}/`;
}

/** Where the store counts `l` at `now`: the bucket, its current window's start, and the limit. */
export function windowOf(l: RateLimit, now: number): RateWindow {
  return { bucket: `${bucketPrefix(l.kind, l.id)}${l.windowMs}`, start: Math.floor(now / l.windowMs) * l.windowMs, limit: l.max };
}

/** 429 with Retry-After (to the window's end) once the window holds more than the limit; `count` is after this hit. */
export function judge(metrics: { rateLimited(kind: LimitKind): void }, l: RateLimit, count: number, now: number): void {
  if (count <= l.max) return;
  metrics.rateLimited(l.kind);
  const end = windowOf(l, now).start + l.windowMs;
  throw new Refusal('rate-limited', `more than ${l.max} requests in ${l.windowMs / 1000} s`, {
    retryAfterS: Math.max(1, Math.ceil((end - now) / 1000)),
  });
}

/** A source address as a limit counts it: IPv6 by its /64 (one host owns a whole /64), IPv4 whole. */
export function addressBucket(address: string): string {
  const plain = plainAddress(address);
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
