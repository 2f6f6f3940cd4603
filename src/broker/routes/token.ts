/** POST /v1/token (DESIGN §3.7): the access token of the key's own botId — never a refresh token. */
import type { Route } from '../context.js';
import { refuseOverLimit, windowOf } from '../limits.js';
import { Refusal } from '../refusal.js';
import { checkWindow, NONCE_KEEP_MS, readSigned, replayed, verifySignature } from '../signed.js';
import { DEFAULT_MIN_VALIDITY_S } from '../tokens.js';
import { activeKey } from './active-key.js';

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
  const { row, key, token: cached } = await activeKey(ctx, input.auth.keyId);
  verifySignature(key, input);
  // The nonce, then the key's hourly count, then its last-seen time: one step of the store (one round trip).
  const now = ctx.clock.wallNow();
  const limit = { bucket: `key:${row.keyId}`, windowMs: HOUR_MS, limit: ctx.limits.deviceTokensPerHour };
  const { key: bucket, windowStart } = windowOf(limit, now);
  const keepUntil = input.auth.tsMs + NONCE_KEEP_MS;
  const spent = await ctx.store.spend({
    keyId: row.keyId,
    nonce: input.auth.nonce,
    keepUntil,
    bucket,
    windowStart,
    limit: limit.limit,
    now,
  });
  if (spent.replayed) throw replayed();
  refuseOverLimit(ctx, limit, spent.count, windowStart, now);
  const issued = await ctx.issuer.issue(row.botId, min, { token: cached });
  ctx.metrics.issued(issued.source);
  ctx.audit.info({ audit: 'token', botId: row.botId, keyId: row.keyId, source: req.source, outcome: issued.source }, 'token issued');
  return {
    status: 200,
    body: { botId: row.botId, accessToken: issued.accessToken, expireIn: issued.expireIn, expiresAt: issued.expiresAt },
  };
};
