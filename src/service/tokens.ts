import type { Identity } from '../protocol/wire.js';
import type { ServiceContext } from './context.js';
import { newToken, tokenHash } from './credentials.js';
import type { TokenKind, TokenRecord } from './store-schema.js';

/** getToken's access and refresh tokens, stored in one statement. */
export function issueTokenPair(
  ctx: ServiceContext,
  accessKeyId: string,
  identity: Identity,
): { accessToken: string; refreshToken: string } {
  const accessToken = newToken();
  const refreshToken = newToken();
  const now = ctx.now();
  const accessHash = tokenHash(accessToken);
  const refreshHash = tokenHash(refreshToken);
  const access: TokenRecord = { kind: 'access', accessKeyId, identity, expiresAt: now + ctx.accessTtlS * 1000 };
  const refresh: TokenRecord = { kind: 'refresh', accessKeyId, identity, expiresAt: now + ctx.refreshTtlS * 1000 };
  ctx.store.saveTokenPair(accessHash, access, refreshHash, refresh);
  ctx.issued({ identity, accessHash, refreshHash });
  return { accessToken, refreshToken };
}

/** An access token issued by a refresh; it replaces the one that refresh token issued two refreshes ago. */
export function issueRefreshedToken(ctx: ServiceContext, refreshToken: string, refresh: TokenRecord): string {
  const token = newToken();
  const record: TokenRecord = { ...refresh, kind: 'access', expiresAt: ctx.now() + ctx.accessTtlS * 1000 };
  const refreshHash = tokenHash(refreshToken);
  const accessHash = tokenHash(token);
  ctx.store.saveRefreshedToken(refreshHash, refresh.expiresAt, accessHash, record);
  ctx.issued({ identity: refresh.identity, accessHash, refreshHash });
  return token;
}

/** The stored record of a token of this kind that has not expired on the service clock. */
export function liveToken(ctx: ServiceContext, token: string, kind: TokenKind): TokenRecord | undefined {
  const record = ctx.store.findToken(tokenHash(token));
  if (!record || record.kind !== kind || record.expiresAt <= ctx.now()) return undefined;
  return record;
}

/** The live access token named by an `Authorization: Bearer …` header. */
export function bearerAccess(ctx: ServiceContext, authorization: string | undefined): TokenRecord | undefined {
  const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
  return match?.[1] === undefined ? undefined : liveToken(ctx, match[1], 'access');
}

export function sameIdentity(a: Identity, b: Identity): boolean {
  return a.kind === b.kind && a.id === b.id;
}
