import type { Logger } from 'pino';
import type { Identity } from '../../protocol/wire.js';
import type { CloudClient } from '../../cloud/client.js';
import { CloudError } from '../../cloud/errors.js';
import type { TimeReader } from '../../clock.js';
import type { TrustedTime } from '../time/trusted-time.js';
import type { TokenPair } from '../store/token-store.js';
import { refreshedPair, signedPair } from './pairs.js';
import { signedGetToken } from './signflow.js';
import type { Renewed, TokenSource } from './source.js';

interface RenewalDeps {
  api: CloudClient;
  time: TrustedTime;
  clock: TimeReader;
  log: Logger;
  identity: Identity;
}

/** Stamps expiries on trusted time when there is one; a refresh may have run on an untrusted clock. */
async function stamp(deps: Pick<RenewalDeps, 'time' | 'clock'>, make: (base: number) => TokenPair): Promise<Renewed> {
  await deps.time.verdict();
  const serverNow = deps.time.now();
  return { pair: make(serverNow ?? deps.clock.wallNow()), serverNow };
}

/** The pair with a refreshed access token; 'refused' when the service refused the refresh token (sign again). */
async function refresh(deps: RenewalDeps, pair: TokenPair): Promise<Renewed | 'refused'> {
  try {
    const res = await deps.api.refreshToken(deps.identity, pair.refreshToken);
    return await stamp(deps, (base) => refreshedPair(pair, res, base));
  } catch (err) {
    if (!(err instanceof CloudError && err.code === 'ERR_REFRESH_REFUSED')) throw err;
    deps.log.warn({ code: err.serviceCode }, 'refresh token refused; signing again');
    return 'refused';
  }
}

/** A new pair from the signed flow (DESIGN §1.2). */
async function sign(deps: RenewalDeps): Promise<Renewed> {
  const res = await signedGetToken(deps, deps.identity);
  return stamp(deps, (base) => signedPair(res, base));
}

/** Signing mode: this device signs getToken with the account secret, and refreshes with the refresh token. */
export function signingSource(api: CloudClient, clock: TimeReader): TokenSource {
  return {
    mode: 'sign',
    obtained: 'signed',
    obtain: (ctx) => sign({ api, clock, ...ctx }),
    refresh: (ctx, pair) => refresh({ api, clock, ...ctx }, pair),
    sampleServerTime: () => api.sampleServerTime(),
  };
}
