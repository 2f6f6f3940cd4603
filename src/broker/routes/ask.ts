/**
 * A code-less enrollment's first ask (DESIGN §3.7 "Enrollment with no code"): admitted by its vendor's
 * pendingEnrollment, refused before anything is written when the device is held or a limit of waiting keys is
 * full, then made a pending row in one transaction that checks all of it again and counts the key's first ask. Later asks of the key are
 * the key stage's (auth/pending.ts).
 */
import type { DeviceType } from '../../protocol/wire.js';
import { DEVICE_ACTOR } from '../audit/trail.js';
import { addressBucket, type RateLimit } from '../auth/limits.js';
import { firstAskWindow, pendingAnswer } from '../auth/pending.js';
import type { BrokerContext, RouteAnswer } from '../context.js';
import { Refusal } from '../refusal.js';
import type { AskOutcome } from '../store/types.js';
import { askRefusal, refuseAsk } from './admission.js';

const MINUTE_MS = 60_000;

/** What a first ask carries of its device: the pending row is pinned to it. */
export interface AskFields {
  deviceId: string;
  publicKey: string;
  appId: string;
  type: DeviceType;
  name: string;
}

/** The reads a first ask is judged by, before its nonce: its refusal thrown, else the limit its first ask counts against. */
export async function admitAsk(ctx: BrokerContext, vendorId: string, deviceId: string, source: string): Promise<RateLimit> {
  const bucket = addressBucket(source);
  const standing = await ctx.store.askStanding(bucket, vendorId, deviceId);
  const refused = refuseAsk({ held: standing.held, waiting: standing, limits: ctx.limits });
  if (refused) throw refused;
  // Only a key's first ask counts toward enrollPerMinute, per source: its later asks are the key's own two a minute.
  return { kind: 'first-ask', id: bucket, windowMs: MINUTE_MS, max: ctx.limits.enrollPerMinute };
}

/** The first ask's row, in one transaction: 202, or the refusal a concurrent request made true meanwhile. */
export async function serveAsk(
  ctx: BrokerContext,
  vendorId: string,
  fields: AskFields,
  keyId: string,
  source: string,
): Promise<RouteAnswer> {
  const now = ctx.clock.wallNow();
  const outcome = await ctx.store.askPending({
    row: {
      keyId,
      publicKey: fields.publicKey,
      vendorId,
      deviceId: fields.deviceId,
      appId: fields.appId,
      type: fields.type,
      name: fields.name,
      source,
      firstAsked: now,
      lastAsked: now,
    },
    sourceBucket: addressBucket(source),
    perSource: ctx.limits.pendingPerSource,
    perVendor: ctx.limits.pendingMax,
    window: firstAskWindow(keyId, now, ctx.limits.pendingRetryAfterS),
  });
  const refused = refusalOf(outcome);
  if (refused) throw refused;
  if (outcome === 'created') {
    ctx.audit.record(
      { action: 'pending', actor: DEVICE_ACTOR, vendorId, deviceId: fields.deviceId, keyId, source, outcome: 'created' },
      'key waits for an operator',
    );
  }
  return pendingAnswer(keyId, ctx.limits.pendingRetryAfterS);
}

function refusalOf(outcome: AskOutcome): Refusal | undefined {
  if (outcome === 'created' || outcome === 'asked') return undefined;
  if (outcome === 'key-exists') return new Refusal('revoked', 'this key was enrolled before');
  return askRefusal(outcome);
}
