import type { GetTokenSuccess, RefreshTokenSuccess } from '../../protocol/wire.js';
import type { TokenPair } from '../store/token-store.js';
import type { TokenFacts } from './policy.js';

/** The pair a getToken answer makes; `base` is the server time it was issued at (or the best local guess). */
export function signedPair(res: GetTokenSuccess, base: number): TokenPair {
  return {
    accessToken: res.accessToken,
    accessExpiresAt: base + res.expireIn * 1000,
    refreshToken: res.refreshToken,
    refreshExpiresAt: base + res.refreshExpireIn * 1000,
    issuedAt: base,
    accessIssuedAt: base,
  };
}

/** `pair` with the access token a refreshToken answer issued at `base`; the refresh token stays. */
export function refreshedPair(pair: TokenPair, res: RefreshTokenSuccess, base: number): TokenPair {
  return { ...pair, accessToken: res.accessToken, accessExpiresAt: base + res.expireIn * 1000, accessIssuedAt: base };
}

/** A broker's pair holds the access token alone (DESIGN §3.7): this refresh token marks it absent. */
export const NO_REFRESH_TOKEN = '';

/** Whether the pair holds a refresh token (signing mode's pairs do; the broker keeps its own). */
export function holdsRefresh(pair: TokenPair): boolean {
  return pair.refreshToken !== NO_REFRESH_TOKEN;
}

/** When the pair's refresh token expires; undefined without a pair, or for a broker's pair, which holds none. */
export function refreshExpiresAt(pair: TokenPair | undefined): number | undefined {
  return pair && holdsRefresh(pair) ? pair.refreshExpiresAt : undefined;
}

/**
 * The pair a broker's token makes: the access token alone, issued when the broker's clock says
 * (expiresAt − expireIn), so no local clock enters it; the absent refresh token "expires" with it.
 */
export function brokeredPair(issued: { accessToken: string; expireIn: number; expiresAt: number }): TokenPair {
  const issuedAt = issued.expiresAt - issued.expireIn * 1000;
  return {
    accessToken: issued.accessToken,
    accessExpiresAt: issued.expiresAt,
    refreshToken: NO_REFRESH_TOKEN,
    refreshExpiresAt: issued.expiresAt,
    issuedAt,
    accessIssuedAt: issuedAt,
  };
}

/** The policy's view of a pair: each token's expiry and the lifetime it was issued with (no refresh in a broker's pair). */
export function pairFacts(pair: TokenPair | undefined): Pick<TokenFacts, 'access' | 'refresh'> {
  if (!pair) return {};
  const access = { expiresAt: pair.accessExpiresAt, lifetimeMs: pair.accessExpiresAt - issuedAt(pair) };
  if (!holdsRefresh(pair)) return { access };
  return { access, refresh: { expiresAt: pair.refreshExpiresAt, lifetimeMs: pair.refreshExpiresAt - pair.issuedAt } };
}

/** When the pair's current access token was issued: of two pairs, the later one is kept. */
export function issuedAt(pair: TokenPair): number {
  return pair.accessIssuedAt ?? pair.issuedAt;
}
