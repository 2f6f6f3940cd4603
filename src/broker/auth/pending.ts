/**
 * A signed request from a key that waits for an operator (DESIGN §3.7 "Waiting"): a route that declares it
 * answers 202 `{state: "pending", keyId}` with Retry-After (enroll, check), after the route's own check of the
 * ask and the nonce, at most twice a minute per key; any other route refuses it 403 `pending`, writing nothing.
 */
import { NONCE_KEEP_MS } from '../../protocol/broker.js';
import type { BrokerContext, RouteAnswer } from '../context.js';
import { Refusal } from '../refusal.js';
import type { PendingRow } from '../store/types.js';
import type { DeviceAuthorization } from '../../protocol/device-sig.js';
import { judge, type RateLimit, windowOf } from './limits.js';

/** How long a waiting device is told to wait before it asks again. */
export const PENDING_RETRY_AFTER_S = 60;
const ASKS_PER_MINUTE = 2;
const MINUTE_MS = 60_000;

/** A route's word on a pending key's request: answered 202, unless `check` refuses it (before anything is written). */
export interface WhilePending<F> {
  check?(fields: F, row: PendingRow): Refusal | undefined;
}

/** The request of a pending key whose signature verified (`row`: its pending row): 202, or its refusal. */
export async function answerPending<F>(
  ctx: BrokerContext,
  route: WhilePending<F> | undefined,
  req: { auth: DeviceAuthorization; fields: F },
  row: PendingRow,
): Promise<RouteAnswer> {
  if (route === undefined) throw new Refusal('pending', 'this key waits for an operator to accept its enrollment');
  const refused = route.check?.(req.fields, row);
  if (refused) throw refused;
  const { auth } = req;
  const now = ctx.clock.wallNow();
  const limit = askLimit(auth.keyId);
  // The nonce, the key's count and its lastAsked: one step of the store.
  const spent = await ctx.store.askAgain(
    { keyId: auth.keyId, nonce: auth.nonce, keepUntil: auth.tsMs + NONCE_KEEP_MS, window: windowOf(limit, now) },
    now,
  );
  if (spent.count !== undefined) judge(ctx.metrics, limit, spent.count, now);
  if (spent.replayed) throw new Refusal('replayed', 'this nonce was used before');
  return pendingAnswer(auth.keyId);
}

/** A waiting key's asks, its first included: at most two a minute. */
function askLimit(keyId: string): RateLimit {
  return { kind: 'ask', id: keyId, windowMs: MINUTE_MS, max: ASKS_PER_MINUTE };
}

/** The window a first ask takes its place in among the key's two a minute (its nonce was taken under the source's first-ask limit). */
export function firstAskWindow(keyId: string, now: number): { bucket: string; start: number } {
  const { bucket, start } = windowOf(askLimit(keyId), now);
  return { bucket, start };
}

/** 202 `{state: "pending", keyId}`: not a failure, the device asks again after Retry-After. */
export function pendingAnswer(keyId: string): RouteAnswer {
  return { status: 202, body: { state: 'pending', keyId }, retryAfterS: PENDING_RETRY_AFTER_S };
}
