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

/** The policy's view of a pair: each token's expiry and the lifetime it was issued with. */
export function pairFacts(pair: TokenPair | undefined): Pick<TokenFacts, 'access' | 'refresh'> {
  if (!pair) return {};
  return {
    access: { expiresAt: pair.accessExpiresAt, lifetimeMs: pair.accessExpiresAt - issuedAt(pair) },
    refresh: { expiresAt: pair.refreshExpiresAt, lifetimeMs: pair.refreshExpiresAt - pair.issuedAt },
  };
}

/** When the pair's current access token was issued: of two pairs, the later one is kept. */
export function issuedAt(pair: TokenPair): number {
  return pair.accessIssuedAt ?? pair.issuedAt;
}
