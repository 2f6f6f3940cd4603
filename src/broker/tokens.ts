/**
 * Access tokens on the devices' behalf (DESIGN §3.7): from the cache while enough life is left, else
 * renewed with the refresh token, else signed again — one cloud call per botId at a time, across
 * replicas. The device never sees a refresh token; both tokens are sealed at rest.
 */
import type { CloudClient } from '../cloud/client.js';
import type { GetTokenSuccess } from '../protocol/wire.js';
import { CloudError } from '../cloud/errors.js';
import type { Clock } from '../clock.js';
import type { CloudGate } from './cloud-gate.js';
import type { BrokerKeys } from './keys.js';
import { Refusal } from './refusal.js';
import type { BrokerStore, TokenRow } from './store/types.js';

export const DEFAULT_MIN_VALIDITY_S = 1800;
/** Requests of one botId that may wait on a replica besides the one at the cloud: a stolen key cannot park more. */
export const MAX_WAITING_PER_BOT = 4;
/** What a request refused for that is told to wait, in seconds: about one cloud call. */
const WAITING_RETRY_AFTER_S = 5;
/** Sign again rather than refresh once the refresh token has less than this left (DESIGN §1.6). */
const REFRESH_MARGIN_MS = 24 * 3600 * 1000;

export interface IssuedToken {
  accessToken: string;
  expireIn: number;
  expiresAt: number;
  source: 'cache' | 'refresh' | 'sign';
}

export interface TokenIssuerDeps {
  store: BrokerStore;
  keys: BrokerKeys;
  cloud: CloudClient;
  gate: CloudGate;
  clock: Clock;
}

/** Whether `row` still has more than `minValidityS` (capped at half its lifetime) left at `now`. */
export function cacheServes(row: TokenRow | undefined, minValidityS: number, now: number): row is TokenRow {
  if (row === undefined) return false;
  const needS = Math.min(minValidityS, row.accessLifetimeS / 2);
  return row.accessExpiresAt - now > needS * 1000;
}

export class TokenIssuer {
  readonly #d: TokenIssuerDeps;
  /** Requests in the renewal path per botId on this replica: the one at the cloud and those waiting on its lock. */
  readonly #renewing = new Map<string, number>();

  constructor(deps: TokenIssuerDeps) {
    this.#d = deps;
  }

  /**
   * The access token of `key`'s botId. `read`: the botId's token row as the request already read it (with
   * its key), so it is not read again. A token renewed for it is kept, and handed out, only while the key
   * is still active (BrokerStore.keepToken): a revoke that committed meanwhile makes it 403 revoked.
   */
  async issue(key: { keyId: string; botId: string }, minValidityS: number, read?: { token: TokenRow | undefined }): Promise<IssuedToken> {
    const { botId } = key;
    const cached = this.#served(read ? read.token : await this.#d.store.readToken(botId), minValidityS);
    if (cached) return cached;
    const renewing = this.#renewing.get(botId) ?? 0;
    if (renewing > MAX_WAITING_PER_BOT) {
      throw new Refusal('rate-limited', `${MAX_WAITING_PER_BOT} requests of this device already wait for its token`, {
        retryAfterS: WAITING_RETRY_AFTER_S,
      });
    }
    this.#renewing.set(botId, renewing + 1);
    try {
      // Read again under the lock: whoever held it before may have just renewed this very token.
      return await this.#d.store.withBotLock(botId, async () => {
        const row = await this.#d.store.readToken(botId);
        return this.#served(row, minValidityS) ?? this.#renew(key, row);
      });
    } finally {
      const left = (this.#renewing.get(botId) ?? 1) - 1;
      if (left === 0) this.#renewing.delete(botId);
      else this.#renewing.set(botId, left);
    }
  }

  #served(row: TokenRow | undefined, minValidityS: number): IssuedToken | undefined {
    const now = this.#d.clock.wallNow();
    if (!cacheServes(row, minValidityS, now)) return undefined;
    return {
      accessToken: this.#d.keys.open(row.accessSealed),
      expireIn: Math.floor((row.accessExpiresAt - now) / 1000),
      expiresAt: row.accessExpiresAt,
      source: 'cache',
    };
  }

  async #renew(key: { keyId: string; botId: string }, row: TokenRow | undefined): Promise<IssuedToken> {
    const { keys, cloud, gate, clock } = this.#d;
    const { botId } = key;
    const identity = { kind: 'bot', id: botId } as const;
    if (row?.refreshSealed && row.refreshExpiresAt !== null && row.refreshExpiresAt - clock.wallNow() > REFRESH_MARGIN_MS) {
      try {
        const fresh = await gate.run(() => cloud.refreshToken(identity, keys.open(row.refreshSealed as Buffer)));
        const now = clock.wallNow();
        const expiresAt = now + fresh.expireIn * 1000;
        await this.#keep(key.keyId, {
          ...row,
          accessSealed: keys.seal(fresh.accessToken),
          accessExpiresAt: expiresAt,
          accessLifetimeS: fresh.expireIn,
          updatedAt: now,
        });
        return { accessToken: fresh.accessToken, expireIn: fresh.expireIn, expiresAt, source: 'refresh' };
      } catch (err) {
        // A refused refresh means "sign again" (DESIGN §1.3); an unreachable cloud is the same failure either way.
        if (!(err instanceof CloudError && err.code === 'ERR_REFRESH_REFUSED')) throw cloudRefusal(err);
      }
    }
    let pair: GetTokenSuccess;
    try {
      pair = await gate.run(() => cloud.getToken(identity, clock.wallNow()));
    } catch (err) {
      throw cloudRefusal(err);
    }
    const now = clock.wallNow();
    const expiresAt = now + pair.expireIn * 1000;
    await this.#keep(key.keyId, {
      botId,
      accessSealed: keys.seal(pair.accessToken),
      accessExpiresAt: expiresAt,
      accessLifetimeS: pair.expireIn,
      refreshSealed: keys.seal(pair.refreshToken),
      refreshExpiresAt: now + pair.refreshExpireIn * 1000,
      updatedAt: now,
    });
    return { accessToken: pair.accessToken, expireIn: pair.expireIn, expiresAt, source: 'sign' };
  }

  async #keep(keyId: string, row: TokenRow): Promise<void> {
    if (!(await this.#d.store.keepToken(keyId, row))) throw new Refusal('revoked', 'this key was revoked, replaced or rotated away');
  }
}

/** A failed cloud call as the device is told of it: the cloud's refusal (502) or its absence (503). */
export function cloudRefusal(err: unknown): Refusal {
  if (err instanceof Refusal) return err;
  if (err instanceof CloudError && err.serviceCode !== undefined) {
    return new Refusal('cloud-refused', `the cloud refused (code ${err.serviceCode})`, { extra: { cloudCode: err.serviceCode } });
  }
  return new Refusal('cloud-unreachable', 'the cloud cannot be reached now', { retryAfterS: 10 });
}
