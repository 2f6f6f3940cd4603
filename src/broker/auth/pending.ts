/**
 * A signed request from a key that waits for an operator (DESIGN §3.7 "Waiting"): a route that declares it
 * answers 202 `{state: "pending", keyId}` with Retry-After (enroll, check), after the route's own check of the
 * ask and the nonce, at most twice a minute per key; any other route refuses it 403 `pending`, writing nothing.
 * Retry-After is the broker's pendingRetryAfterS (60 by default, the contract's); set lower (the demo's broker),
 * the two asks are per that many seconds, so a device that honours it is never refused for its pace.
 */
import { NONCE_KEEP_MS } from '../../protocol/broker.js';
import type { BrokerContext, RouteAnswer } from '../context.js';
import { Refusal } from '../refusal.js';
import type { PendingRow, RequestSpend, SpendOutcome } from '../store/types.js';
import type { DeviceAuthorization } from '../../protocol/device-sig.js';
import { judge, type RateLimit, windowOf } from './limits.js';

const ASKS_PER_WINDOW = 2;
const MINUTE_MS = 60_000;

/** A route's word on a pending key's request: answered 202, unless `check` refuses it (before anything is written). */
export interface WhilePending<F> {
  check?(fields: F, row: PendingRow): Refusal | undefined;
}

/**
 * The request of a pending key whose signature verified (`row`: its pending row): 202, or its refusal. `asked`: the
 * ask already spent in the key stage's one step (findCarriedKey), whose gate is the route's check.
 */
export async function answerPending<F>(
  ctx: BrokerContext,
  route: WhilePending<F> | undefined,
  req: { auth: DeviceAuthorization; fields: F },
  row: PendingRow,
  asked?: SpendOutcome,
): Promise<RouteAnswer> {
  if (route === undefined) throw new Refusal('pending', 'this key waits for an operator to accept its enrollment');
  const refused = route.check?.(req.fields, row);
  if (refused) throw refused;
  const { auth } = req;
  const now = ctx.clock.wallNow();
  const retryAfterS = ctx.limits.pendingRetryAfterS;
  // The nonce, the key's count and its lastAsked: one step of the store, unless the key stage took it.
  const spent =
    asked ??
    (await ctx.store.askAgain({
      ...againSpend(auth, now, retryAfterS),
      publicKey: row.publicKey,
      deviceId: row.deviceId,
      vendorId: row.vendorId,
    }));
  // Accepted or rejected since it was read: nothing written, and the next ask finds what it is now.
  if (spent === undefined) return pendingAnswer(auth.keyId, retryAfterS);
  if (spent.count !== undefined) judge(ctx.metrics, askLimit(auth.keyId, retryAfterS), spent.count, now);
  if (spent.replayed) throw new Refusal('replayed', 'this nonce was used before');
  return pendingAnswer(auth.keyId, retryAfterS);
}

/** A later ask's nonce and its place among the key's two a minute (`retryAfterS`: pendingRetryAfterS). */
export function againSpend(auth: DeviceAuthorization, now: number, retryAfterS: number): RequestSpend & { now: number } {
  const window = windowOf(askLimit(auth.keyId, retryAfterS), now);
  return { keyId: auth.keyId, nonce: auth.nonce, keepUntil: auth.tsMs + NONCE_KEEP_MS, window, now };
}

/**
 * A waiting key's asks, its first included: at most two a minute, or per Retry-After when the broker tells its
 * devices to ask sooner. A device waits at least Retry-After between asks (its jitter only adds), so two per
 * window of that length leave room for a retry after a lost answer.
 */
export function askLimit(keyId: string, retryAfterS: number): RateLimit {
  return { kind: 'ask', id: keyId, windowMs: Math.min(MINUTE_MS, retryAfterS * 1000), max: ASKS_PER_WINDOW };
}

/** The window a first ask takes its place in among the key's two a minute (its nonce was taken under the source's first-ask limit). */
export function firstAskWindow(keyId: string, now: number, retryAfterS: number): { bucket: string; start: number } {
  const { bucket, start } = windowOf(askLimit(keyId, retryAfterS), now);
  return { bucket, start };
}

/** 202 `{state: "pending", keyId}`: not a failure, the device asks again after Retry-After. */
export function pendingAnswer(keyId: string, retryAfterS: number): RouteAnswer {
  return { status: 202, body: { state: 'pending', keyId }, retryAfterS };
}
