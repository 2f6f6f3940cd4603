/** POST /v1/token (DESIGN §3.7): the access token of the key's own botId — never a refresh token. */
import type { BrokerContext, Route } from '../context.js';
import { refuseOverLimit, windowOf } from '../limits.js';
import { Refusal } from '../refusal.js';
import {
  badSignature,
  checkWindow,
  NONCE_KEEP_MS,
  readSigned,
  replayed,
  type SignedInput,
  signatureMatches,
  verifySignature,
} from '../signed.js';
import { DEFAULT_MIN_VALIDITY_S } from '../tokens.js';
import { activeKey, refuseInactive } from './active-key.js';

const HOUR_MS = 3_600_000;
/** A device asking for more than a day of validity asks for what no token has. */
const MAX_MIN_VALIDITY_S = 86_400;

export const token: Route = async (ctx, req) => {
  const input = readSigned(req.method, req.path, req.authorization, req.raw);
  const min = input.body['minValidityS'] ?? DEFAULT_MIN_VALIDITY_S;
  if (typeof min !== 'number' || !Number.isInteger(min) || min < 0 || min > MAX_MIN_VALIDITY_S) {
    throw new Refusal('bad-request', `minValidityS must be a whole number of seconds from 0 to ${MAX_MIN_VALIDITY_S}`);
  }
  checkWindow(input.auth, ctx.clock.wallNow());
  const keyId = input.auth.keyId;
  const publicKey = await verifiedKey(ctx, input);
  // The key read again with its cached token, then the nonce, the hourly count and last-seen: one step of the store.
  const now = ctx.clock.wallNow();
  const limit = { bucket: `key:${keyId}`, windowMs: HOUR_MS, limit: ctx.limits.deviceTokensPerHour };
  const { key: bucket, windowStart } = windowOf(limit, now);
  const keepUntil = input.auth.tsMs + NONCE_KEEP_MS;
  const found = await ctx.store.spendVerified({
    keyId,
    publicKey,
    nonce: input.auth.nonce,
    keepUntil,
    bucket,
    windowStart,
    limit: limit.limit,
    now,
  });
  refuseInactive(found.key);
  if (found.spent === undefined) {
    // Active, yet not the key verified: no store holds two keys under one keyId, so only a cache gone wrong.
    ctx.keyCache.delete(keyId);
    throw new Refusal('revoked', 'this key was revoked, replaced or rotated away');
  }
  if (found.spent.replayed) throw replayed();
  refuseOverLimit(ctx, limit, found.spent.count, windowStart, now);
  const row = found.key;
  const issued = await ctx.issuer.issue(row.botId, min, { token: found.token });
  ctx.metrics.issued(issued.source);
  ctx.audit.info({ audit: 'token', botId: row.botId, keyId, source: req.source, outcome: issued.source }, 'token issued');
  return {
    status: 200,
    body: { botId: row.botId, accessToken: issued.accessToken, expireIn: issued.expireIn, expiresAt: issued.expiresAt },
  };
};

/**
 * The signature checked, and the stored public key it was checked with. A device that asked lately has its
 * key in the cache, and the store is read once, after (spendVerified decides whether the key is still
 * active). Any other, or a signature that fails with a cached key, takes §3.7's order: the key read
 * first, so an unknown or revoked key is told before a bad signature.
 */
async function verifiedKey(ctx: BrokerContext, input: SignedInput): Promise<string> {
  const cached = ctx.keyCache.get(input.auth.keyId);
  if (cached !== undefined && signatureMatches(cached.key, input)) return cached.publicKey;
  const { row, key } = await activeKey(ctx, input.auth.keyId);
  // Failed with this very key already: a second verification would only double a forger's cost to us.
  if (cached?.publicKey === row.publicKey) throw badSignature();
  verifySignature(key, input);
  ctx.keyCache.set(row.keyId, { key, publicKey: row.publicKey });
  return row.publicKey;
}
